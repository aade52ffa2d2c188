#include "remote/node_weights.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "core/error.h"
#include "remote/wire.h"

namespace pronghorn::remote {

WeightAssembler::Result WeightAssembler::refuse(std::string why) {
  if (assembling_) ++refused_;  // count a version once, however many of its chunks follow
  assembling_ = false;
  params_.clear();
  why_ = std::move(why);
  return Result::kRefused;
}

WeightAssembler::Result WeightAssembler::add(const v1::WeightsChunk& chunk) {
  const uint64_t bytes = chunk.data().size();
  if (chunk.offset() == 0) {
    if (assembling_) {  // the one in progress never finished: short
      refuse(fmt::format("version {} ended after {} of its {} bytes", version_, received_, total_));
    }
    const uint64_t total = chunk.total_bytes();
    if (total == 0 || total % sizeof(float) != 0 || total > kMaxBytes) {
      ++refused_;
      return refuse(
          fmt::format("version {} claims {} bytes: not a float32 vector", chunk.version(), total));
    }
    assembling_ = true;
    version_ = chunk.version();
    total_ = total;
    checksum_ = chunk.checksum();
    received_ = 0;
    params_.assign(total / sizeof(float), 0.0f);
  } else if (!assembling_) {
    return refuse(fmt::format("a chunk of version {} at offset {} with no start before it",
                              chunk.version(), chunk.offset()));
  } else if (chunk.version() != version_ || chunk.total_bytes() != total_ ||
             chunk.checksum() != checksum_ || chunk.offset() != received_) {
    return refuse(fmt::format(
        "version {}: a chunk of version {} at offset {} where offset {} of {} bytes was due",
        version_, chunk.version(), chunk.offset(), received_, total_));
  }
  if (bytes > total_ - received_) {
    return refuse(fmt::format("version {}: {} bytes at offset {} overrun its {} bytes", version_,
                              bytes, received_, total_));
  }
  std::memcpy(reinterpret_cast<char*>(params_.data()) + received_, chunk.data().data(), bytes);
  received_ += bytes;
  if (received_ < total_) return Result::kPartial;
  assembling_ = false;
  const uint32_t crc = crc32_of(params_.data(), total_);
  if (crc != checksum_) {
    ++refused_;
    return refuse(fmt::format("version {}: CRC-32 {:08x} of its bytes, {:08x} announced", version_,
                              crc, checksum_));
  }
  return Result::kComplete;
}

void VersionMap::add(uint64_t local, LearnerVersion learner) {
  map_[local] = std::move(learner);
  while (map_.size() > kKept) map_.erase(map_.begin());
}

std::optional<LearnerVersion> VersionMap::find(uint64_t local) const {
  const auto it = map_.find(local);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

std::optional<LearnerVersion> VersionMap::newest() const {
  if (map_.empty()) return std::nullopt;
  return map_.rbegin()->second;
}

void LocalWeights::publish(const std::string& incarnation, uint64_t learner_version,
                           const std::vector<float>& params) {
  const std::lock_guard lock(mutex_);
  const auto count = static_cast<int64_t>(params.size());
  if (!slab_) {
    slab_ = buffer::WeightSlab::create(slab_name_, count);
  } else if (slab_->count() != count) {
    throw UsageError(fmt::format(
        "the learner's weights now hold {} parameters, this node's actors {}: the job's model "
        "changed; start the node again",
        count, slab_->count()));
  }
  const uint64_t local = slab_->publish(params.data());
  versions_.add(local, {incarnation, learner_version});
  has_weights_ = true;
}

std::optional<LearnerVersion> LocalWeights::find(uint64_t local) const {
  const std::lock_guard lock(mutex_);
  return versions_.find(local);
}

std::optional<LearnerVersion> LocalWeights::newest() const {
  const std::lock_guard lock(mutex_);
  return versions_.newest();
}

WeightsReceiver::WeightsReceiver(v1::ActorGateway::Stub& stub, const std::string& token,
                                 const std::string& session, std::string incarnation,
                                 LocalWeights& weights)
    : incarnation_(std::move(incarnation)), weights_(weights) {
  context_.AddMetadata("authorization", "Bearer " + token);
  context_.AddMetadata(kSessionMetadata, session);
  reader_ = stub.StreamWeights(&context_, v1::StreamWeightsRequest());
  thread_ = std::thread([this] { run(); });
}

WeightsReceiver::~WeightsReceiver() { finish(); }

void WeightsReceiver::run() {
  WeightAssembler assembler;
  v1::WeightsChunk chunk;
  try {
    while (reader_->Read(&chunk)) {
      const auto result = assembler.add(chunk);
      if (result == WeightAssembler::Result::kRefused) {
        spdlog::warn("weights from the learner refused: {}", assembler.why());
        continue;
      }
      if (result != WeightAssembler::Result::kComplete) continue;
      const LearnerVersion got{incarnation_, assembler.version()};
      // The newest version again (a reconnect to the same learner): the slab
      // has it already; it still marks this session ready.
      if (weights_.newest() != got) weights_.publish(incarnation_, got.version, assembler.take());
      ready_ = true;
    }
  } catch (const std::exception& e) {  // a thread's edge: the node's loop decides
    failure_ = e.what();
    context_.TryCancel();
    while (reader_->Read(&chunk)) {
    }
  }
  ended_ = true;
}

grpc::Status WeightsReceiver::finish() {
  if (status_) return *status_;
  if (!ended_) context_.TryCancel();  // one already over keeps its own status
  if (thread_.joinable()) thread_.join();
  status_ = reader_->Finish();
  return *status_;
}

}  // namespace pronghorn::remote
