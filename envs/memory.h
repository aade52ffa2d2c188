// Memory: an env that a memoryless policy cannot solve. The first
// observation of an episode shows a cue, one of kCues, as a one-hot; then come
// kMinDelay to kMaxDelay blank observations (all zeros) and a query (the
// last element set, no cue). The action taken at the query ends the episode
// (terminated) with reward 1 if it names the cue, else 0; every other action
// does nothing and earns 0. A policy that sees only the query picks right
// half the time (return 0.5); one that remembers the cue gets 1. The delay
// is drawn per episode, so episodes do not line up with unrolls.
// Observation float32[kCues + 1]; actions: kCues discrete. Truncated only
// where env.max_episode_steps is set below an episode's length.
// Test: envs/memory_test.cpp. Preset: configs/memory.toml (model.core = "lstm").
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "envs/env.h"
#include "envs/rng.h"

namespace pronghorn::envs {

class Memory final : public BatchEnv {
 public:
  static constexpr int64_t kCues = 2;
  static constexpr int64_t kMinDelay = 5;  // blank steps between the cue and the query
  static constexpr int64_t kMaxDelay = 10;
  static constexpr int64_t kObs = kCues + 1;
  static constexpr int64_t kMaxEpisodeSteps = 100;  // beyond any episode: never reached

  static EnvSpec make_spec(int64_t max_episode_steps) {
    EnvSpec spec;
    spec.name = "memory";
    spec.obs_dtype = Dtype::kFloat32;
    spec.obs_shape = {kObs};
    spec.action_kind = ActionKind::kDiscrete;
    spec.action_size = kCues;
    spec.max_episode_steps = max_episode_steps > 0 ? max_episode_steps : kMaxEpisodeSteps;
    spec.target_return = 0.9;  // nine cues in ten remembered; chance is 0.5
    return spec;
  }

  Memory(int64_t num_envs, uint64_t seed, int64_t max_episode_steps)
      : BatchEnv(make_spec(max_episode_steps), num_envs),
        limit_(spec().max_episode_steps),
        cue_(num_envs),
        query_at_(num_envs),
        steps_(num_envs),
        rngs_(num_envs) {
    for (int64_t i = 0; i < num_envs; ++i) rngs_[i] = Rng(seed, static_cast<uint64_t>(i));
  }

 private:
  void reset_unchecked(void* obs) override {
    for (int64_t i = 0; i < num_envs(); ++i) start_episode(i, static_cast<float*>(obs));
  }

  void step_unchecked(const void* actions, const StepOutput& out) override {
    const int32_t* action = static_cast<const int32_t*>(actions);
    float* obs = static_cast<float*>(out.obs);
    for (int64_t i = 0; i < num_envs(); ++i) {
      const bool answered = steps_[i] == query_at_[i];
      out.rewards[i] = answered && action[i] == cue_[i] ? 1.0f : 0.0f;
      out.terminated[i] = answered;
      steps_[i] += 1;
      out.truncated[i] = !answered && steps_[i] >= limit_;
      float* row = obs + kObs * i;
      std::fill_n(row, kObs, 0.0f);
      if (steps_[i] == query_at_[i]) row[kCues] = 1.0f;
      if (out.terminated[i] || out.truncated[i]) {
        if (out.final_obs != nullptr) {
          std::memcpy(static_cast<float*>(out.final_obs) + kObs * i, row, kObs * sizeof(float));
        }
        start_episode(i, obs);
      }
    }
  }

  void start_episode(int64_t i, float* obs) {
    cue_[i] = static_cast<int32_t>(rngs_[i].below(kCues));
    query_at_[i] = 1 + kMinDelay + rngs_[i].below(kMaxDelay - kMinDelay + 1);
    steps_[i] = 0;
    float* row = obs + kObs * i;
    std::fill_n(row, kObs, 0.0f);
    row[cue_[i]] = 1.0f;
  }

  const int64_t limit_;
  std::vector<int32_t> cue_;       // [K] this episode's cue
  std::vector<int64_t> query_at_;  // [K] the step whose observation is the query
  std::vector<int64_t> steps_;     // [K] steps taken in this episode
  std::vector<Rng> rngs_;          // [K]
};

}  // namespace pronghorn::envs
