// Prepares the learner's batch n+1 while step n computes (docs/architecture.md §3):
// ring → take B unrolls → make_batch (copies them out) → release the slots
// at once → a one-batch mailbox → the learner's loop.
// Releasing right after the copy hands slots back to actors while the step
// runs. Policy lag and staleness are judged against the version published
// when the batch was taken, at most one step behind the learner's.
// Under run.deterministic a batch is gathered actor by actor instead: the
// oldest `unrolls` of actor 0, then of actor 1, … (Lockstep), whatever their
// lag, so that the same unrolls always meet in the same order.
// Threads: one of its own; next() and set_version() from the learner's loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "buffer/ring.h"
#include "core/config.h"
#include "envs/env.h"
#include "learner/trainer.h"

namespace pronghorn::learner {

struct PreparedBatch {
  Batch batch;
  size_t unrolls = 0;
  double wait_s = 0;   // the prefetch thread's wait for B committed unrolls
  double batch_s = 0;  // forming the tensors
};

// run.deterministic: each batch takes `unrolls` from each of actors
// 0 … `actors` − 1; 0 actors = off.
struct Lockstep {
  uint32_t actors = 0, unrolls = 0;
};

class BatchPrefetcher {
 public:
  BatchPrefetcher(buffer::Ring& ring, const envs::EnvSpec& spec, const Config& config,
                  uint64_t version, Lockstep lockstep = {});
  ~BatchPrefetcher();  // stop(), its batch dropped

  // The next batch, or nothing after `timeout`. Rethrows what the thread threw.
  std::optional<PreparedBatch> next(std::chrono::milliseconds timeout);
  // Stops and joins the thread; returns the batch it had prepared, if any:
  // its unrolls left the ring, so the caller trains on it or they are lost.
  std::optional<PreparedBatch> stop();
  // The policy version the next takes are judged against.
  void set_version(uint64_t version) { version_.store(version); }

 private:
  void run();
  // The unrolls of the next batch, or nothing yet (a timeout: call again).
  std::optional<std::vector<buffer::TakenSlot>> take(uint64_t version);

  buffer::Ring& ring_;
  const envs::EnvSpec& spec_;
  const Config& config_;
  const Lockstep lockstep_;
  std::vector<buffer::TakenSlot> gathered_;  // lockstep: the actors' unrolls taken so far
  std::atomic<uint64_t> version_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<PreparedBatch> mailbox_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace pronghorn::learner
