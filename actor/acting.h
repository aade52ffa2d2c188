// The one acting loop (docs/architecture.md §1): K envs stepped as one batch
// by the policy face. An actor (actor/actor.cpp) runs it into ring slots; an
// evaluation (actor/evaluation.h) runs it greedily and counts returns. One
// step:
//
//   obs [K, obs...] → policy.act (sampled or greedy) → env.step → the next
//   obs, rewards, flags → V(final obs) where a time limit cut an episode
//   (when asked) → each ended episode's return and length → the recurrent
//   core reset where an episode ended
//
// Threads: one (the process's acting thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "envs/env.h"
#include "model/policy_face.h"

namespace pronghorn::actor {

class ActingLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // Where one step writes: the envs' outputs (final_obs is the loop's own:
  // leave it null), and optionally V(final obs) [K] (zero where no time
  // limit cut; null: not computed).
  struct StepInto {
    envs::StepOutput env;
    float* final_values = nullptr;
  };
  // An episode that ended at this step, in env row order; while it is
  // heard of, episode_info(env) holds its numbers (EnvSpec::episode_info).
  using EpisodeEnd = std::function<void(int64_t env, double episode_return, int32_t length)>;
  // Where the time of a step went.
  struct StepTimes {
    Clock::duration policy{}, env{};
  };

  // Acts in `env` with `model` (fused or LibTorch as model.fast_path says;
  // the fused sampler seeded with `sampling_seed`).
  ActingLoop(std::unique_ptr<envs::BatchEnv> env, PolicyNet model, ModelConfig::FastPath fast_path,
             uint64_t sampling_seed);

  const EnvSpec& spec() const { return env_->spec(); }
  envs::BatchEnv& env() { return *env_; }
  int64_t num_envs() const { return k_; }
  InferencePolicy& policy() { return policy_; }

  // Starts a fresh episode in every env: obs [K, obs...], the core state and
  // the running returns to zero.
  void reset(void* obs);

  // One step from obs [K, obs...]: the actions go to `actions` (as
  // InferencePolicy::act writes them; the clipped continuous actions are the
  // loop's own), the rest to `into`; `ended` hears of each episode that
  // ended.
  StepTimes step(const void* obs, bool greedy, ActionsOut actions, const StepInto& into,
                 const EpisodeEnd& ended);
  // The numbers env `env`'s ended episode reported, [spec().episode_info.size()].
  const float* episode_info(int64_t env) const {
    return episode_info_.data() + env * static_cast<int64_t>(spec().episode_info.size());
  }

 private:
  std::unique_ptr<envs::BatchEnv> env_;
  int64_t k_;
  InferencePolicy policy_;
  std::vector<float> clipped_;  // [K, D] continuous actions as the env steps them
  std::vector<uint8_t> final_obs_;
  std::vector<float> episode_info_;     // [K, spec().episode_info.size()]
  std::vector<float> values_;           // [K] V(final obs), scratch
  std::vector<double> running_return_;  // summed in double, as an evaluation reports it
  std::vector<int32_t> running_length_;
};

}  // namespace pronghorn::actor
