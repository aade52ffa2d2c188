// The learner (DESIGN.md §1, §3): take B unrolls from the ring → view them as
// [T+1, B·K] tensors → model forward → V-trace (or GAE) → fused loss →
// backward → clip → optimizer → publish weights to the slab → release.
// train() runs it with the supervisor of this node's actors, reports
// metrics, checkpoints every run.checkpoint_interval_s and at a clean stop,
// and stops at run.total_steps or run.target_return.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "core/config.h"

namespace pronghorn::learner {

struct TrainOptions {
  Config config;
  std::string run_dir;  // exists; config.toml is written there first
  bool resume = false;  // continue from the newest valid checkpoint in run_dir/checkpoints
  // Called once the job has started (control plane listening, actors
  // spawned); an exception before it is a job that failed to start.
  std::function<void()> on_started;
};

// Where the run ended: when it reached run.target_return or run.total_steps,
// the figures at that moment (the batch prepared meanwhile is still trained
// on and counted in the metrics, not here).
struct TrainResult {
  uint64_t env_steps = 0;  // trained on (since the run began, across resumes)
  uint64_t learner_steps = 0;
  double seconds = 0;
  double return_mean = 0;  // over the last 100 episodes
  bool reached_target = false;
};

// Trains until done or `stop` is set (SIGINT/SIGTERM); leaves no actor
// process and no shared-memory segment behind.
TrainResult train(const TrainOptions& options, const std::atomic<bool>& stop);

}  // namespace pronghorn::learner
