#include "learner/run_stats.h"

#include <algorithm>
#include <cmath>
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
  const size_t keys = episode_info_keys.size();
  recent_info.resize(keys);
  for (size_t e = 0; keys > 0 && e < b.episode_returns.size(); ++e) {
    for (size_t i = 0; i < keys; ++i) {
      const float v = b.episode_info[e * keys + i];
      if (!std::isfinite(v)) continue;  // NaN: none given; ±inf would hold the mean for good
      recent_info[i].push_back(v);
      if (recent_info[i].size() > kRecentEpisodes) recent_info[i].pop_front();
    }
  }
}

double RunStats::episode_info_mean(size_t i) const {
  if (i >= recent_info.size() || recent_info[i].empty()) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return std::accumulate(recent_info[i].begin(), recent_info[i].end(), 0.0) /
         static_cast<double>(recent_info[i].size());
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
