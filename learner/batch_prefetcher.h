// Prepares the learner's batch n+1 while step n computes (docs/architecture.md §3):
// ring → take B unrolls → make_batch (copies them out) → release the slots
// at once → a one-batch mailbox → the learner's loop.
// Releasing right after the copy hands slots back to actors while the step
// runs. Policy lag and staleness are judged against the version published
// when the batch was taken, at most one step behind the learner's.
// Threads: one of its own; next() and set_version() from the learner's loop.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

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

class BatchPrefetcher {
 public:
  BatchPrefetcher(buffer::Ring& ring, const envs::EnvSpec& spec, const Config& config,
                  uint64_t version);
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

  buffer::Ring& ring_;
  const envs::EnvSpec& spec_;
  const Config& config_;
  std::atomic<uint64_t> version_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<PreparedBatch> mailbox_;
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace pronghorn::learner
