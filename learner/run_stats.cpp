#include "learner/run_stats.h"

#include <algorithm>
#include <numeric>

namespace pronghorn::learner {

void RunStats::add(const Batch& b, const StepStats& step, size_t taken_unrolls, uint64_t steps) {
  last = step;
  stage_time.actor_env_s += b.actor_env_s;
  stage_time.actor_policy_s += b.actor_policy_s;
  stage_time.actor_wait_s += b.actor_wait_s;
  stage_time.learner_forward_s += step.forward_s;
  stage_time.learner_backward_s += step.backward_s;
  stage_time.learner_optimizer_s += step.optimizer_s;
  env_steps += steps;
  ++learner_steps;
  optimizer_steps += static_cast<uint64_t>(step.optimizer_steps);
  unrolls += taken_unrolls;
  lag_sum += b.lag_sum;
  lag_max = std::max(lag_max, b.lag_max);
  for (size_t i = 0; i < b.episode_returns.size(); ++i) {
    recent.push_back(b.episode_returns[i]);
    recent_lengths.push_back(b.episode_lengths[i]);
    if (recent.size() > kRecentEpisodes) {
      recent.pop_front();
      recent_lengths.pop_front();
    }
  }
  episodes += b.episode_returns.size();
}

double RunStats::return_mean() const {
  return recent.empty() ? 0.0 : std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
}

double RunStats::length_mean() const {
  return recent_lengths.empty()
             ? 0.0
             : std::accumulate(recent_lengths.begin(), recent_lengths.end(), 0.0) /
                   recent_lengths.size();
}

}  // namespace pronghorn::learner
