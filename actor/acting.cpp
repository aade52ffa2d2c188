#include "actor/acting.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pronghorn::actor {

ActingLoop::ActingLoop(std::unique_ptr<envs::BatchEnv> env, PolicyNet model,
                       ModelConfig::FastPath fast_path, uint64_t sampling_seed)
    : env_(std::move(env)),
      k_(env_->num_envs()),
      rows_(env_->split_rows()),
      clipped_(env_->spec().action_kind == ActionKind::kContinuous ? k_ * env_->spec().action_size
                                                                   : 0),
      final_obs_(env_->spec().obs_bytes() * k_),
      episode_info_(env_->spec().episode_info.size() * k_, std::nanf("")),
      values_(k_),
      running_return_(k_, 0.0),
      running_length_(k_, 0) {
  for (int64_t s = 0; s < env_->splits(); ++s) {
    // Split 0 keeps the seed it had before splits; the others' streams are
    // apart from any other actor's (whose seeds differ by small numbers).
    const uint64_t seed = sampling_seed ^ (static_cast<uint64_t>(s) * 0x9E3779B97F4A7C15ULL);
    policies_.push_back(
        std::make_unique<InferencePolicy>(model, env_->spec(), rows_, fast_path, seed));
  }
}

void ActingLoop::load(const float* flat) {
  for (auto& policy : policies_) policy->load(flat);
}

void ActingLoop::write_core_state(float* into) const {
  if (policies_.size() == 1) {
    policies_.front()->write_core_state(into);
    return;
  }
  // Each split's [2, K/S, H] into its rows of h and of c. Once an unroll.
  const int64_t width = policies_.front()->core_width(), part = rows_ * width;
  std::vector<float> split_state(static_cast<size_t>(2 * part));
  for (size_t s = 0; s < policies_.size(); ++s) {
    policies_[s]->write_core_state(split_state.data());
    std::copy_n(split_state.data(), part, into + s * part);                      // h
    std::copy_n(split_state.data() + part, part, into + k_ * width + s * part);  // c
  }
}

void ActingLoop::reset(void* obs) {
  env_->reset(obs);
  for (auto& policy : policies_) policy->reset();
  std::fill(running_return_.begin(), running_return_.end(), 0.0);
  std::fill(running_length_.begin(), running_length_.end(), 0);
}

ActingLoop::StepTimes ActingLoop::step(const void* obs, bool greedy, ActionsOut actions,
                                       const StepInto& into, const EpisodeEnd& ended) {
  const Step step{obs, actions, into};
  return run(
             1, greedy, [&](int64_t) { return step; }, ended, [] { return false; })
      .times;
}

ActingLoop::Run ActingLoop::run(int64_t steps, bool greedy, const StepAt& at,
                                const EpisodeEnd& ended, const std::function<bool()>& go_on) {
  Run run;
  if (steps <= 0) return run;
  const int64_t splits = env_->splits();
  Step current = at(0), next;
  for (int64_t s = 0; s < splits; ++s) act(s, current, greedy, run.times);
  for (;;) {
    const bool more = run.steps + 1 < steps && go_on();
    if (more) next = at(run.steps + 1);
    // Split s's next step is acted as soon as its step is done, while the
    // splits after it still step.
    for (int64_t s = 0; s < splits; ++s) {
      finish(s, current, ended, run.times);
      if (more) act(s, next, greedy, run.times);
    }
    ++run.steps;
    if (!more) return run;
    current = next;
  }
}

void ActingLoop::act(int64_t split, const Step& step, bool greedy, StepTimes& times) {
  const auto policy_start = Clock::now();
  const EnvSpec& spec = env_->spec();
  const int64_t first = split * rows_, dims = spec.action_size;
  const bool continuous = !clipped_.empty();
  ActionsOut actions = step.actions;
  if (actions.log_probs != nullptr) actions.log_probs += first;
  if (continuous) {
    if (actions.continuous != nullptr) actions.continuous += first * dims;  // an evaluation's: none
    actions.clipped = clipped_.data() + first * dims;
  } else {
    actions.discrete += first;
  }
  policies_[split]->act(static_cast<const uint8_t*>(step.obs) + first * spec.obs_bytes(), greedy,
                        actions);
  const auto env_start = Clock::now();
  times.policy += env_start - policy_start;
  env_->begin_step(split, continuous ? static_cast<const void*>(actions.clipped)
                                     : static_cast<const void*>(actions.discrete));
  times.env += Clock::now() - env_start;
}

void ActingLoop::finish(int64_t split, const Step& step, const EpisodeEnd& ended,
                        StepTimes& times) {
  const auto env_start = Clock::now();
  const EnvSpec& spec = env_->spec();
  const int64_t first = split * rows_;
  envs::StepOutput out = envs::rows_from(step.into.env, spec, first);
  out.final_obs = final_obs_.data() + first * spec.obs_bytes();
  out.episode_info =
      episode_info_.empty()
          ? nullptr
          : episode_info_.data() + first * static_cast<int64_t>(spec.episode_info.size());
  env_->finish_step(split, out);
  bool any_truncated = false;
  for (int64_t i = 0; i < rows_; ++i) {
    const int64_t k = first + i;
    running_return_[k] += out.rewards[i];
    running_length_[k] += 1;
    any_truncated |= out.truncated[i] != 0;
    if (out.terminated[i] || out.truncated[i]) {
      ended(k, running_return_[k], running_length_[k]);
      running_return_[k] = 0;
      running_length_[k] = 0;
    }
  }
  const auto env_end = Clock::now();
  times.env += env_end - env_start;

  InferencePolicy& policy = *policies_[split];
  if (float* final_values = step.into.final_values; final_values != nullptr) {
    // V of the final observation where a time limit cut the episode
    // (docs/architecture.md §9): the learner bootstraps from it. From the
    // core's state after this step, before the reset: the final observation
    // continues the episode that was cut.
    final_values += first;
    std::fill(final_values, final_values + rows_, 0.0f);
    if (any_truncated) {
      policy.values(out.final_obs, values_.data() + first);
      for (int64_t i = 0; i < rows_; ++i) {
        if (out.truncated[i]) final_values[i] = values_[first + i];
      }
      times.policy += Clock::now() - env_end;
    }
  }
  policy.reset_ended(out.terminated, out.truncated);
}

}  // namespace pronghorn::actor
