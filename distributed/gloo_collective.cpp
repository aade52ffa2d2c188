#include "distributed/gloo_collective.h"

#include <fmt/format.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <torch/torch.h>

#include <chrono>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

namespace pronghorn::distributed {
namespace {

double seconds(std::chrono::milliseconds ms) { return ms.count() / 1000.0; }

// The largest all-reduce run in the calling thread: its ring's two chunks in
// flight (2 × bytes ÷ (2 × world size)) then fit Linux's default socket
// buffers (128 kB to read, 208 kB to write).
constexpr size_t kDirectMaxBytes = 256 * 1024;
// The largest all-reduce by halving and doubling: its first message (half
// the bytes) fits Linux's default socket buffers too, with room to spare.
constexpr size_t kHalvingDoublingMaxBytes = 64 * 1024;

// A tensor over caller memory, no copy.
template <typename T>
at::Tensor view(std::span<T> data, at::ScalarType type) {
  return torch::from_blob(data.data(), {static_cast<int64_t>(data.size())},
                          torch::TensorOptions().dtype(type));
}

}  // namespace

GlooCollective::GlooCollective(const c10::intrusive_ptr<c10d::Store>& store, GlooOptions options)
    : o_(std::move(options)) {
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(o_.timeout);
  gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(o_.bind_address));
  gloo_options->threads = 1;  // one call in flight at a time
  try {
    group_ =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, o_.rank, o_.world_size, gloo_options);
  } catch (const std::exception& e) {
    broken_ = true;
    throw PeerLost(
        fmt::format("rank {}: connecting the Gloo collective from {} failed within "
                    "{:.0f} s: {}; lost: {}",
                    o_.rank, o_.bind_address, seconds(o_.timeout), e.what(), o_.lost_peers()));
  }
#ifdef PRONGHORN_GLOO_DIRECT
  try {
    ::gloo::transport::tcp::attr attr(o_.bind_address.c_str());
    device_ = ::gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<::gloo::rendezvous::Context>(o_.rank, o_.world_size);
    context_->setTimeout(o_.timeout);
    c10d::ProcessGroupGloo::GlooStore gloo_store(
        c10::make_intrusive<c10d::PrefixStore>("ring", store));
    context_->connectFullMesh(gloo_store, device_);
    for (int r = 0; r < o_.world_size; ++r) {
      // Read by the calling thread, asleep in its socket (Gloo's busy-polling
      // starved ranks that share a core: 3 ranks on 2 cores took 11 ms a call).
      if (r != o_.rank) context_->getPair(r)->setSync(true, false);
    }
  } catch (const std::exception& e) {
    throw PeerLost(fmt::format(
        "rank {}: connecting the Gloo all-reduce from {} failed within {:.0f} s: {}; lost: {}",
        o_.rank, o_.bind_address, seconds(o_.timeout), e.what(), o_.lost_peers()));
  }
#endif
}

GlooCollective::~GlooCollective() {
  // Its destructor would join threads that may wait on a lost peer.
  if (broken_) (void)group_.release();
}

void GlooCollective::check_usable() const {
  if (broken_) throw PeerLost(fmt::format("rank {}: the collective was aborted", o_.rank));
}

void GlooCollective::run(const char* what,
                         const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
  check_usable();
  try {
    auto work = start();
    // Gloo's own timeout fires first; this one holds should it not.
    work->wait(o_.timeout + std::chrono::seconds(2));
  } catch (const std::exception& e) {
    throw lost(what, e);
  }
}

PeerLost GlooCollective::lost(const char* what, const std::exception& e) {
  broken_ = true;
  std::string cause = e.what();
  if (const size_t newline = cause.find('\n'); newline != std::string::npos) {
    cause.resize(newline);  // c10::Error appends a backtrace
  }
  return PeerLost(
      fmt::format("rank {}: lost {}: {} failed: {} (deadline {:g} s, "
                  "distributed.timeout_s)",
                  o_.rank, o_.lost_peers(), what, cause, seconds(o_.timeout)));
}

template <typename T>
GlooCollective::Direct<T>& GlooCollective::direct(size_t count) {
  auto& made_before = [this]() -> std::map<size_t, Direct<T>>& {
    if constexpr (std::is_same_v<T, float>) {
      return float_direct_;
    } else {
      return int_direct_;
    }
  }();
  auto found = made_before.find(count);
  if (found != made_before.end()) return found->second;
  Direct<T>& made = made_before[count];
  made.buffer.resize(count);
  // Each part of the buffer is summed on one rank and then passed on, so
  // every rank gets the same bits (the replicas stay identical); Gloo's
  // plain ring sums in each rank's own order (3 ranks' replicas drifted
  // apart). Halving and doubling takes 2·log2(N) hops for a power of two N
  // where the chunked ring takes 2·(N − 1): each hop is a wake-up of a
  // peer, which costs more than a small buffer's bytes (BENCHMARKS.md).
  const std::vector<T*> buffers{made.buffer.data()};
  if (count * sizeof(T) <= kHalvingDoublingMaxBytes) {
    made.algorithm = std::make_unique<::gloo::AllreduceHalvingDoubling<T>>(context_, buffers,
                                                                           static_cast<int>(count));
  } else {
    made.algorithm = std::make_unique<::gloo::AllreduceRingChunked<T>>(context_, buffers,
                                                                       static_cast<int>(count));
  }
  return made;
}

template <typename T>
void GlooCollective::all_reduce(std::span<T> data, at::ScalarType type) {
#ifdef PRONGHORN_GLOO_DIRECT
  if (!data.empty() && data.size_bytes() <= kDirectMaxBytes) {
    check_usable();
    try {
      Direct<T>& r = direct<T>(data.size());
      std::copy(data.begin(), data.end(), r.buffer.begin());
      r.algorithm->run();  // every read and write within distributed.timeout_s
      std::copy(r.buffer.begin(), r.buffer.end(), data.begin());
    } catch (const std::exception& e) {
      throw lost("all-reduce", e);
    }
    return;
  }
#endif
  std::vector<at::Tensor> tensors{view(data, type)};
  run("all-reduce", [&] { return group_->allreduce(tensors); });
}

void GlooCollective::all_reduce_sum(std::span<float> data) { all_reduce(data, at::kFloat); }

void GlooCollective::all_reduce_sum(std::span<int64_t> data) { all_reduce(data, at::kLong); }

void GlooCollective::broadcast(std::span<std::byte> data, int root) {
  std::vector<at::Tensor> tensors{view(data, at::kByte)};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  run("broadcast", [&] { return group_->broadcast(tensors, options); });
}

void GlooCollective::barrier() {
  run("barrier", [&] { return group_->barrier(); });
}

void GlooCollective::abort() { broken_ = true; }

}  // namespace pronghorn::distributed
