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
// With env.splits = S (a Python env's; envs/env.h, splits()) the K rows are
// S groups, each acted by a policy of its own rows, and run() overlaps them:
// while split s + 1 steps in the env's worker processes, the loop finishes
// split s's step and acts for its next one (double buffering, as Sample Factory's
// worker_num_splits). Every step of an unroll is still acted by the
// unroll's one policy version: run() finishes every split before it
// returns, so the overlap stops at each unroll's end (about 1/T of it lost).
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

  // Where one step writes: the envs' outputs (final_obs and episode_info are
  // the loop's own: leave them null), and optionally V(final obs) [K] (zero
  // where no time limit cut; null: not computed).
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
  // Step t of a run: its observations [K, obs...] (those step t − 1 wrote,
  // or reset's), where its actions go (as InferencePolicy::act writes them;
  // the clipped continuous actions are the loop's own) and the rest.
  struct Step {
    const void* obs = nullptr;
    ActionsOut actions;
    StepInto into;
  };
  using StepAt = std::function<Step(int64_t t)>;

  // Acts in `env` with `model` (fused or LibTorch as model.fast_path says;
  // the fused sampler seeded with `sampling_seed`, split s's with a seed of
  // its own).
  ActingLoop(std::unique_ptr<envs::BatchEnv> env, PolicyNet model, ModelConfig::FastPath fast_path,
             uint64_t sampling_seed);

  const EnvSpec& spec() const { return env_->spec(); }
  envs::BatchEnv& env() { return *env_; }
  int64_t num_envs() const { return k_; }
  // Floats of one policy version (InferencePolicy::published_count()).
  int64_t published_count() const { return policies_.front()->published_count(); }
  // A new policy version for every split (InferencePolicy::load).
  void load(const float* flat);
  // The core state of the K envs, h then c, into [2, K, H]; nothing for a
  // feed-forward model.
  void write_core_state(float* into) const;

  // Starts a fresh episode in every env: obs [K, obs...], the core state and
  // the running returns to zero.
  void reset(void* obs);

  // One step from obs [K, obs...]: the actions go to `actions`, the rest to
  // `into`; `ended` hears of each episode that ended.
  StepTimes step(const void* obs, bool greedy, ActionsOut actions, const StepInto& into,
                 const EpisodeEnd& ended);

  // `steps` steps, step t as at(t) says (step t + 1's obs: the ones step t
  // writes), the splits overlapped. Before each step after the first,
  // go_on() may end the run: the steps in flight are finished first.
  struct Run {
    StepTimes times;
    int64_t steps = 0;  // done
  };
  Run run(int64_t steps, bool greedy, const StepAt& at, const EpisodeEnd& ended,
          const std::function<bool()>& go_on);

  // The numbers env `env`'s ended episode reported, [spec().episode_info.size()].
  const float* episode_info(int64_t env) const {
    return episode_info_.data() + env * static_cast<int64_t>(spec().episode_info.size());
  }

 private:
  // Split s's policy acts on its rows of `step`, then its env step begins.
  void act(int64_t split, const Step& step, bool greedy, StepTimes& times);
  // Awaits split s's env step and does the rest of the step on its rows.
  void finish(int64_t split, const Step& step, const EpisodeEnd& ended, StepTimes& times);

  std::unique_ptr<envs::BatchEnv> env_;
  int64_t k_, rows_;                                        // rows_: K / S, a split's
  std::vector<std::unique_ptr<InferencePolicy>> policies_;  // [S], each of rows_ envs
  std::vector<float> clipped_;  // [K, D] continuous actions as the env steps them
  std::vector<uint8_t> final_obs_;
  std::vector<float> episode_info_;     // [K, spec().episode_info.size()]
  std::vector<float> values_;           // [K] V(final obs), scratch
  std::vector<double> running_return_;  // summed in double, as an evaluation reports it
  std::vector<int32_t> running_length_;
};

}  // namespace pronghorn::actor
