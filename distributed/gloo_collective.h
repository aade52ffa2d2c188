// Collective over Gloo (CPU buffers). c10d's ProcessGroupGloo connects every
// pair of ranks through the rendezvous store, binding `bind_address`
// (route.h): never what the hostname resolves to. An all-reduce of at most
// kDirectMaxBytes, once per optimizer step for an MLP, runs on a Gloo context
// of its own in the calling thread (Gloo's synchronous pairs), where
// LibTorch's Gloo is the system's (PRONGHORN_GLOO_DIRECT, CMakeLists.txt):
// through c10d each call crossed its worker thread and back, each a wake-up,
// and took 1.4–6.6 ms for a [64, 64] MLP's gradients in training on a VM's
// vCPUs, 0.24–0.99 ms on its own (BENCHMARKS.md); up to 64 kB by halving
// and doubling (2·log2 N hops at a power of two), above by a chunked ring
// (2·(N − 1)). Larger ones stay c10d's: a synchronous ring writes two
// chunks before it reads, which must fit the sockets' buffers or every rank
// waits in its write. Connecting the second context may take Gloo's 5 ×
// distributed.timeout_s for a peer lost then, as c10d's connect may.
//
// LibTorch 1.13's Gloo cannot abort a pending operation, and its destructor
// joins worker threads that may wait on a lost peer: once a call has failed,
// the process group is left alive and the process is expected to end with
// _exit (main does, for a PeerLost), so the deadline holds.
#pragma once

#include <gloo/algorithm.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <vector>

#include "distributed/collective.h"

namespace pronghorn::distributed {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  std::string bind_address;                   // this rank's address toward rank 0
  std::chrono::milliseconds timeout{60'000};  // every call, and connecting
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
  // After `what` failed with `e`: unusable from now on; the error naming the
  // lost peer and the cause's first line.
  PeerLost lost(const char* what, const std::exception& e);
  // The all-reduce of `count` elements of T, in place over `data`.
  template <typename T>
  void all_reduce(std::span<T> data, at::ScalarType type);
  // Throws PeerLost once a call has failed or abort() was called.
  void check_usable() const;
  // A small all-reduce in the calling thread, over a buffer of its own, one
  // per element type and count: every rank makes the same calls with the
  // same counts, so every rank builds the same ones in the same order (each
  // takes the context's next slot), whatever its buffers' addresses.
  template <typename T>
  struct Direct {
    std::vector<T> buffer;
    std::unique_ptr<::gloo::Algorithm> algorithm;
  };
  template <typename T>
  Direct<T>& direct(size_t count);

  GlooOptions o_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::shared_ptr<::gloo::transport::Device> device_;     // PRONGHORN_GLOO_DIRECT's
  std::shared_ptr<::gloo::rendezvous::Context> context_;  // the small all-reduces'
  std::map<size_t, Direct<float>> float_direct_;
  std::map<size_t, Direct<int64_t>> int_direct_;
  bool broken_ = false;
};

}  // namespace pronghorn::distributed
