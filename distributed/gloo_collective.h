// Collective over Gloo, through c10d's ProcessGroupGloo (CPU buffers). The
// process group connects every pair of ranks through the rendezvous store,
// binding `bind_address` (route.h): never what the hostname resolves to.
//
// LibTorch 1.13's Gloo cannot abort a pending operation, and its destructor
// joins worker threads that may wait on a lost peer: once a call has failed,
// the process group is left alive and the process is expected to end with
// _exit (main does, for a PeerLost), so the deadline holds.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "distributed/collective.h"

namespace pronghorn::distributed {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  std::string bind_address;                   // this rank's address toward rank 0
  std::chrono::milliseconds timeout{60'000};  // every call, and connecting
  // How long a call's caller polls for its end, yielding the core, before it
  // sleeps on it. A thread asleep wakes late on a virtual machine (its vCPU
  // halted), at each of the call's hops; polling pays where nothing else of
  // the rank needs the core meanwhile, and costs the rank's actors CPU
  // where they run beside the learner.
  std::chrono::microseconds poll{0};
  // Names the lost rank after a failure ("rank 1"); Rendezvous::lost_peers.
  std::function<std::string()> lost_peers = [] { return std::string("a peer"); };
};

class GlooCollective : public Collective {
 public:
  // Connects to every other rank within the timeout, else PeerLost.
  GlooCollective(const c10::intrusive_ptr<c10d::Store>& store, GlooOptions options);
  ~GlooCollective() override;

  int rank() const override { return o_.rank; }
  int world_size() const override { return o_.world_size; }
  std::string backend() const override { return "gloo"; }

  void all_reduce_sum(std::span<float> data) override;
  void all_reduce_sum(std::span<int64_t> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void barrier() override;
  void abort() override;

 private:
  void run(const char* what, const std::function<c10::intrusive_ptr<c10d::Work>()>& start);

  GlooOptions o_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  bool broken_ = false;
};

}  // namespace pronghorn::distributed
