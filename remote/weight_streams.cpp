#include "remote/weight_streams.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "proto/remote.pb.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using namespace std::chrono_literals;

class Refused final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// The slab's newest version, read once, as chunks ready to write.
std::shared_ptr<const WeightStreams::Version> make_version(const buffer::WeightSlab& slab) {
  std::vector<float> weights(static_cast<size_t>(slab.count()));
  auto version = std::make_shared<WeightStreams::Version>();
  version->version = slab.read(weights.data());
  const auto* bytes = reinterpret_cast<const char*>(weights.data());
  const size_t total = weights.size() * sizeof(float);
  const uint32_t checksum = crc32_of(bytes, total);
  size_t offset = 0;
  do {  // at least one chunk, even for no weights
    const size_t n = std::min(kWeightChunkBytes, total - offset);
    v1::WeightsChunk chunk;
    chunk.set_version(version->version);
    chunk.set_total_bytes(total);
    chunk.set_offset(offset);
    chunk.set_checksum(checksum);
    chunk.set_data(bytes + offset, n);
    grpc::ByteBuffer& buffer = version->chunks.emplace_back();
    bool own = false;
    const grpc::Status serialised =
        grpc::SerializationTraits<v1::WeightsChunk>::Serialize(chunk, &buffer, &own);
    if (!serialised.ok()) throw std::runtime_error("weights: " + serialised.error_message());
    offset += n;
  } while (offset < total);
  return version;
}

}  // namespace

// A node's stream: the chunks of one version after another; between
// versions it takes the newest (every decision under the owner's mutex,
// the gRPC call after it).
class WeightStreams::Stream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit Stream(WeightStreams& owner) : owner_(owner) {}

  enum class Action { kNone, kWrite, kFinish };
  // Under the owner's mutex.
  Action next(grpc::Status& finish_with) {
    if (finished_ || writing_) return Action::kNone;
    const bool mid_version = current_ && next_chunk_ < current_->chunks.size();
    if (owner_.end_ && (!mid_version || !owner_.end_->ok())) {
      finished_ = true;
      finish_with = *owner_.end_;
      return Action::kFinish;
    }
    if (!mid_version) {
      if (!owner_.newest_ || (current_ && owner_.newest_->version <= current_->version)) {
        return Action::kNone;  // idle until a newer version
      }
      current_ = owner_.newest_;
      next_chunk_ = 0;
    }
    writing_ = true;
    return Action::kWrite;
  }
  void act(Action action, const grpc::Status& status) {
    if (action == Action::kWrite) StartWrite(&current_->chunks[next_chunk_]);
    if (action == Action::kFinish) Finish(status);
  }

 private:
  void OnWriteDone(bool ok) override {
    Action action = Action::kNone;
    grpc::Status status;
    {
      std::lock_guard lock(owner_.mutex_);
      writing_ = false;
      ++next_chunk_;
      if (!ok && !finished_) {  // the node is gone
        finished_ = true;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "node gone");
        action = Action::kFinish;
      } else {
        action = next(status);
      }
    }
    act(action, status);
  }
  void OnDone() override {
    owner_.forget(this);
    delete this;
  }

  WeightStreams& owner_;
  std::shared_ptr<const Version> current_;
  size_t next_chunk_ = 0;
  bool writing_ = false, finished_ = false;
};

WeightStreams::WeightStreams(const buffer::WeightSlab& slab, std::chrono::milliseconds interval)
    : slab_(slab), interval_(interval), thread_([this] { make_versions(); }) {}

WeightStreams::~WeightStreams() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WeightStreams::refused(const grpc::Status& status) {
  return new Refused(status);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* WeightStreams::open() {
  auto* stream = new Stream(*this);
  Stream::Action action = Stream::Action::kNone;
  grpc::Status status;
  {
    std::lock_guard lock(mutex_);
    if (end_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the learner is stopping");
      action = Stream::Action::kFinish;
    } else {
      streams_.insert(stream);
      // The newest already made, unless the slab has moved on: then the
      // thread makes the newer one and sends it.
      if (newest_ && newest_->version == slab_.version()) action = stream->next(status);
    }
  }
  changed_.notify_all();
  stream->act(action, status);
  return stream;
}

void WeightStreams::forget(Stream* stream) {
  std::lock_guard lock(mutex_);
  streams_.erase(stream);
  changed_.notify_all();
}

void WeightStreams::end(const grpc::Status& status) {
  std::vector<std::pair<Stream*, Stream::Action>> actions;
  grpc::Status finish_with;
  {
    std::lock_guard lock(mutex_);
    if (!end_) end_ = status;
    finish_with = *end_;
    grpc::Status unused;
    for (Stream* stream : streams_) {
      const Stream::Action action = stream->next(unused);
      if (action != Stream::Action::kNone) actions.emplace_back(stream, action);
    }
  }
  // A stream with an action is alive until it has carried it out.
  for (auto& [stream, action] : actions) stream->act(action, finish_with);
}

void WeightStreams::make_versions() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (streams_.empty() || end_) {
      changed_.wait_for(lock, 1s);
      continue;
    }
    const uint64_t have = newest_ ? newest_->version : 0;
    lock.unlock();
    std::shared_ptr<const Version> made;
    // A wait on the learner's futex word, bounded: nothing new → look again.
    if (slab_.wait_newer(have, 100ms) > have) made = make_version(slab_);
    lock.lock();
    if (!made) continue;
    newest_ = made;
    std::vector<std::pair<Stream*, Stream::Action>> actions;
    grpc::Status unused;
    for (Stream* stream : streams_) {
      const Stream::Action action = stream->next(unused);
      if (action != Stream::Action::kNone) actions.emplace_back(stream, action);
    }
    lock.unlock();
    for (auto& [stream, action] : actions) stream->act(action, unused);
    // At most one version per interval: the learner may publish thousands a second.
    std::this_thread::sleep_for(interval_);
    lock.lock();
  }
}

}  // namespace pronghorn::remote
