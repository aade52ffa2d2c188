#include "distributed/gloo_collective.h"

#include <fmt/format.h>
#include <sched.h>
#include <torch/torch.h>

#include <chrono>

namespace pronghorn::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(std::chrono::milliseconds ms) { return ms.count() / 1000.0; }

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
}

GlooCollective::~GlooCollective() {
  // Its destructor would join threads that may wait on a lost peer.
  if (broken_) (void)group_.release();
}

void GlooCollective::run(const char* what,
                         const std::function<c10::intrusive_ptr<c10d::Work>()>& start) {
  if (broken_) throw PeerLost(fmt::format("rank {}: the collective was aborted", o_.rank));
  try {
    auto work = start();
    for (const auto until = Clock::now() + o_.poll; !work->isCompleted() && Clock::now() < until;) {
      sched_yield();  // polled first (GlooOptions::poll)
    }
    // Gloo's own timeout fires first; this one holds should it not.
    work->wait(o_.timeout + std::chrono::seconds(2));
  } catch (const std::exception& e) {
    broken_ = true;
    std::string cause = e.what();
    if (const size_t newline = cause.find('\n'); newline != std::string::npos) {
      cause.resize(newline);  // c10::Error appends a backtrace
    }
    throw PeerLost(
        fmt::format("rank {}: lost {}: {} failed: {} (deadline {:g} s, "
                    "distributed.timeout_s)",
                    o_.rank, o_.lost_peers(), what, cause, seconds(o_.timeout)));
  }
}

void GlooCollective::all_reduce_sum(std::span<float> data) {
  std::vector<at::Tensor> tensors{view(data, at::kFloat)};
  run("all-reduce", [&] { return group_->allreduce(tensors); });
}

void GlooCollective::all_reduce_sum(std::span<int64_t> data) {
  std::vector<at::Tensor> tensors{view(data, at::kLong)};
  run("all-reduce", [&] { return group_->allreduce(tensors); });
}

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
