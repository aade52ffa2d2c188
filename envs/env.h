// Batched environments (docs/architecture.md §7): one call steps K envs and writes
// straight into the caller's buffers; nothing is allocated per step.
//
// The contract is the plugin ABI's (envs/pronghorn_env.h), in C++:
//   - step() resets every env whose episode ended, by itself: the observation
//     written for it is the first one of its next episode, and the ended
//     episode's last observation goes to `final_obs` (when given) in that
//     env's row only.
//   - `terminated`: a terminal state, no bootstrap. `truncated`: a time limit
//     cut the episode; the learner bootstraps from V(final_obs). Both can be
//     set at once (CartPole's pole falling exactly on step 500).
//   - Each env has its own generator seeded from (seed, index): the same seed
//     and actions give the same trajectories.
// Built-in envs are C++ classes (one header each); user envs come from a
// shared library through the C ABI. make_env() picks by config.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"

namespace pronghorn::envs {

// The plain description of an env lives in core/ (core/env_spec.h); envs
// name it as their own.
using pronghorn::ActionKind;
using pronghorn::Dtype;
using pronghorn::EnvSpec;

// Where step() writes, each the caller's, one row per env.
struct StepOutput {
  void* obs;            // [K, obs...]
  float* rewards;       // [K]
  uint8_t* terminated;  // [K]
  uint8_t* truncated;   // [K]
  void* final_obs;      // [K, obs...] or nullptr
  // [K, spec.episode_info.size()] or nullptr: an ended episode's numbers,
  // in that env's row only (NaN where the env gave none).
  float* episode_info = nullptr;
};

// `out` from row `row` on: each pointer moved that many rows of `spec`'s env.
StepOutput rows_from(const StepOutput& out, const EnvSpec& spec, int64_t row);

class BatchEnv {
 public:
  virtual ~BatchEnv() = default;

  const EnvSpec& spec() const { return spec_; }
  int64_t num_envs() const { return num_envs_; }

  // Starts a new episode in every env and writes obs [K, obs...] (checked
  // finite, as step's).
  void reset(void* obs);

  // actions: int32 [K] (discrete) or float32 [K, dims] (continuous). An action
  // out of range, or not finite, throws Error naming the env, row and value;
  // so does a step before the first reset. So does a NaN or inf the env
  // wrote (reward, float32 observation, or final observation of an ended
  // episode), after the step and before the caller uses it: bad data stops
  // where it enters, whichever env made it.
  void step(const void* actions, const StepOutput& out);

  // Splits (env.splits; Python envs): the K envs in S groups of K/S rows,
  // split s being rows [s·K/S, (s+1)·K/S), that step apart. begin_step(s,
  // actions of its rows) sets split s stepping and returns; finish_step(s,
  // out at its rows) awaits it. While one split steps in the env's worker
  // processes the caller acts for another (double buffering). Each split
  // alternates begin and finish; `actions` must stay as they are until its
  // finish. The checks are step()'s, on the split's rows, and errors name
  // the env's row in the whole batch. An env stepped in the caller's thread
  // has one split: begin_step keeps the actions, finish_step steps.
  virtual int64_t splits() const { return 1; }
  int64_t split_rows() const { return num_envs_ / splits(); }
  void begin_step(int64_t split, const void* actions);
  void finish_step(int64_t split, const StepOutput& out);

  // How errors name this env: "env cartpole", "env corridor (plugin PATH)".
  virtual std::string label() const;

  // Env 0's picture as it is now, RGB [height, width, 3], for a video
  // (`pronghorn eval --video`); nothing when the env draws none. Python envs
  // made to render rgb_array frames draw them; the built-in and plugin envs
  // draw none (a pixel env's observations are its pictures).
  struct Frame {
    int64_t height = 0, width = 0;
    std::vector<uint8_t> rgb;
  };
  virtual std::optional<Frame> frame() { return std::nullopt; }

 protected:
  BatchEnv(EnvSpec spec, int64_t num_envs);
  virtual void reset_unchecked(void* obs) = 0;
  virtual void step_unchecked(const void* actions, const StepOutput& out) = 0;
  // Splits: `actions` and `out` at the split's first row.
  virtual void begin_step_unchecked(int64_t split, const void* actions);
  virtual void finish_step_unchecked(int64_t split, const StepOutput& out);

 private:
  // The checks of rows [first, first + rows), the pointers at row `first`.
  void check_actions(const void* actions, int64_t first, int64_t rows) const;
  void check_finite(const char* call, const StepOutput& out, int64_t first, int64_t rows) const;
  [[noreturn]] void report_non_finite(const char* call, const StepOutput& out, int64_t first,
                                      int64_t rows) const;

  EnvSpec spec_;
  int64_t num_envs_;
  bool started_ = false;
  const void* begun_actions_ = nullptr;  // one split: kept by begin_step for finish_step
};

// The built-in env called `name`, K = num_envs, time limit max_episode_steps
// (0 keeps the env's own). Throws UsageError for an unknown name.
std::unique_ptr<BatchEnv> make_builtin_env(const std::string& name, int64_t num_envs, uint64_t seed,
                                           int64_t max_episode_steps);

// Specs of the built-in envs, with their default time limits.
std::vector<EnvSpec> builtin_env_specs();

// env.plugin when set (loaded through the C ABI), else the built-in env.name.
// Throws UsageError for env.episode_info on an env that has no info (a
// built-in or plugin env), as check_episode_info does.
std::unique_ptr<BatchEnv> make_env(const EnvConfig& config, uint64_t seed);
// Throws UsageError when env.episode_info names keys but the env is a
// built-in or plugin one, whose steps give no info to read them from.
void check_episode_info(const EnvConfig& config);

}  // namespace pronghorn::envs
