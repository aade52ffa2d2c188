// The collective calls several learners make together (docs/architecture.md
// §2): an all-reduce sum of one flat buffer per learner step, a broadcast from
// a root (initial or resumed weights, a repair), a barrier, and abort. Two
// implementations: Gloo (CPU buffers, gloo_collective.h: c10d's group, and
// small all-reduces in the calling thread) and NCCL called directly (CUDA
// buffers, nccl_collective.h).
//
// Every call has a deadline (distributed.timeout_s). A peer that died,
// stopped or lost its link makes the call throw PeerLost within it; the
// collective is unusable afterwards and the job ends with exit code 75.
// Threads: one caller at a time (the learner's loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"

namespace pronghorn::distributed {

// A peer lost or a deadline passed; what() names the rank where it is known
// and the cause. main exits 75 (resumable with --resume).
class PeerLost : public TransientError {
 public:
  using TransientError::TransientError;
};

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // "gloo" or "nccl", for logs and the start-up agreement.
  virtual std::string backend() const = 0;

  // Sums `data` over every rank, in place; every rank passes the same length.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  virtual void all_reduce_sum(std::span<int64_t> data) = 0;
  // Every rank's `data` becomes root's; every rank passes the same length.
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  virtual void barrier() = 0;

  // Ends what is pending and leaves the collective unusable: called once a
  // peer is lost, so that nothing waits on it any more. Safe to call twice.
  virtual void abort() = 0;
};

}  // namespace pronghorn::distributed
