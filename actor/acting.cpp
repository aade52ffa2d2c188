#include "actor/acting.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pronghorn::actor {

ActingLoop::ActingLoop(std::unique_ptr<envs::BatchEnv> env, PolicyNet model,
                       ModelConfig::FastPath fast_path, uint64_t sampling_seed)
    : env_(std::move(env)),
      k_(env_->num_envs()),
      policy_(std::move(model), env_->spec(), k_, fast_path, sampling_seed),
      clipped_(env_->spec().action_kind == ActionKind::kContinuous ? k_ * env_->spec().action_size
                                                                   : 0),
      final_obs_(env_->spec().obs_bytes() * k_),
      episode_info_(env_->spec().episode_info.size() * k_, std::nanf("")),
      values_(k_),
      running_return_(k_, 0.0),
      running_length_(k_, 0) {}

void ActingLoop::reset(void* obs) {
  env_->reset(obs);
  policy_.reset();
  std::fill(running_return_.begin(), running_return_.end(), 0.0);
  std::fill(running_length_.begin(), running_length_.end(), 0);
}

ActingLoop::StepTimes ActingLoop::step(const void* obs, bool greedy, ActionsOut actions,
                                       const StepInto& into, const EpisodeEnd& ended) {
  StepTimes times;
  const auto policy_start = Clock::now();
  const bool continuous = !clipped_.empty();
  if (continuous) actions.clipped = clipped_.data();
  policy_.act(obs, greedy, actions);
  const void* env_actions =
      continuous ? static_cast<const void*>(clipped_.data()) : actions.discrete;
  const auto env_start = Clock::now();
  times.policy = env_start - policy_start;

  envs::StepOutput out = into.env;
  out.final_obs = final_obs_.data();
  out.episode_info = episode_info_.empty() ? nullptr : episode_info_.data();
  env_->step(env_actions, out);
  bool any_truncated = false;
  for (int64_t k = 0; k < k_; ++k) {
    running_return_[k] += out.rewards[k];
    running_length_[k] += 1;
    any_truncated |= out.truncated[k] != 0;
    if (out.terminated[k] || out.truncated[k]) {
      ended(k, running_return_[k], running_length_[k]);
      running_return_[k] = 0;
      running_length_[k] = 0;
    }
  }
  const auto env_end = Clock::now();
  times.env = env_end - env_start;

  if (into.final_values != nullptr) {
    // V of the final observation where a time limit cut the episode
    // (docs/architecture.md §9): the learner bootstraps from it. From the
    // core's state after this step, before the reset: the final observation
    // continues the episode that was cut.
    std::fill(into.final_values, into.final_values + k_, 0.0f);
    if (any_truncated) {
      policy_.values(final_obs_.data(), values_.data());
      for (int64_t k = 0; k < k_; ++k) {
        if (out.truncated[k]) into.final_values[k] = values_[k];
      }
      times.policy += Clock::now() - env_end;
    }
  }
  policy_.reset_ended(out.terminated, out.truncated);
  return times;
}

}  // namespace pronghorn::actor
