// The run's counters and recent statistics, in plain types: the one source of
// metrics.jsonl, the progress line, GetStatus and /metrics (make_status in
// learner/run_status.h turns them into the control plane's message).
// Threads: one (the learner's loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "learner/batch.h"
#include "learner/trainer.h"

namespace pronghorn::learner {

// Where the time of actors and learner went, summed since this learner
// started (the fields of v1::StageTimes).
struct StageTimes {
  double actor_env_s = 0, actor_policy_s = 0, actor_wait_s = 0;
  double learner_wait_s = 0, learner_batch_s = 0, learner_forward_s = 0, learner_backward_s = 0,
         learner_optimizer_s = 0, learner_publish_s = 0, learner_allreduce_s = 0;
};

// Returns are averaged over this many of the last episodes (the "solved"
// criterion of Gym's CartPole, and the mean every report shows).
constexpr size_t kRecentEpisodes = 100;

struct RunStats {
  uint64_t env_steps = 0, learner_steps = 0, episodes = 0;  // since the run began
  uint64_t unrolls = 0, lag_sum = 0, lag_max = 0;           // since this learner started
  uint64_t local_env_steps = 0;        // trained here; env_steps counts every rank's
  uint64_t optimizer_steps = 0;        // since this learner started; several per learner step
  double last_allreduce_s = 0;         // several learners: the last step's all-reduce
  uint64_t untrained_unrolls = 0;      // taken after the run finished, not trained on
  std::deque<float> recent;            // returns of the last episodes
  std::deque<int32_t> recent_lengths;  // and their lengths
  // env.episode_info's keys (EnvSpec::episode_info), set before the first
  // add(), and for each the last finite values episodes gave (NaN, none
  // given, and ±inf are skipped).
  std::vector<std::string> episode_info_keys;
  std::vector<std::deque<float>> recent_info;
  StepStats last;
  double sps = 0, learner_steps_per_s = 0;  // over the last report interval
  double local_sps = 0;                     // and of local_env_steps
  std::string last_checkpoint;
  double last_checkpoint_unix_s = 0;
  StageTimes stage_time;
  // The last evaluation (learner/evaluator.h): NaN returns and 0 episodes
  // until there is one; eval_env_steps is the run's env_steps when the
  // evaluated weights were taken.
  double eval_return_mean = std::numeric_limits<double>::quiet_NaN();
  double eval_return_std = std::numeric_limits<double>::quiet_NaN();
  uint64_t eval_episodes = 0, eval_env_steps = 0;

  // One learner step (one batch, step.optimizer_steps optimizer steps) on
  // `b` (`taken_unrolls` unrolls, `steps` env steps).
  void add(const Batch& b, const StepStats& step, size_t taken_unrolls, uint64_t steps);
  bool has_full_window() const { return recent.size() >= kRecentEpisodes; }
  double return_mean() const;
  double length_mean() const;
  // Key i's mean over recent_info[i]; NaN when no episode gave it yet.
  double episode_info_mean(size_t i) const;
};

}  // namespace pronghorn::learner
