#include "envs/env.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <utility>

#include "core/error.h"
#include "core/suggest.h"
#include "envs/cartpole.h"
#include "envs/ended_rows.h"
#include "envs/finite.h"
#include "envs/memory.h"
#include "envs/pendulum.h"
#include "envs/plugin.h"
#include "envs/pong.h"
#include "envs/python_env.h"

namespace pronghorn::envs {

StepOutput rows_from(const StepOutput& out, const EnvSpec& spec, int64_t row) {
  const size_t obs = spec.obs_bytes() * static_cast<size_t>(row);
  const auto shift = [&](void* p) { return p == nullptr ? p : static_cast<uint8_t*>(p) + obs; };
  return {shift(out.obs),
          out.rewards + row,
          out.terminated + row,
          out.truncated + row,
          shift(out.final_obs),
          out.episode_info == nullptr
              ? nullptr
              : out.episode_info + row * static_cast<int64_t>(spec.episode_info.size())};
}

BatchEnv::BatchEnv(EnvSpec spec, int64_t num_envs) : spec_(std::move(spec)), num_envs_(num_envs) {
  PRONGHORN_CHECK(num_envs >= 1, "env ", spec_.name, ": num_envs = ", num_envs,
                  ": expected at least 1");
}

std::string BatchEnv::label() const { return "env " + spec_.name; }

void BatchEnv::reset(void* obs) {
  reset_unchecked(obs);
  check_finite("reset", {obs, nullptr, nullptr, nullptr, nullptr}, 0, num_envs_);
  started_ = true;
}

void BatchEnv::step(const void* actions, const StepOutput& out) {
  PRONGHORN_CHECK(started_, "env ", spec_.name, ": step() before reset()");
  check_actions(actions, 0, num_envs_);
  step_unchecked(actions, out);
  check_finite("step", out, 0, num_envs_);
}

void BatchEnv::begin_step(int64_t split, const void* actions) {
  PRONGHORN_CHECK(started_, "env ", spec_.name, ": step() before reset()");
  PRONGHORN_ASSERT(split >= 0 && split < splits());
  check_actions(actions, split * split_rows(), split_rows());
  begin_step_unchecked(split, actions);
}

void BatchEnv::finish_step(int64_t split, const StepOutput& out) {
  PRONGHORN_ASSERT(split >= 0 && split < splits());
  finish_step_unchecked(split, out);
  check_finite("step", out, split * split_rows(), split_rows());
}

void BatchEnv::begin_step_unchecked(int64_t split, const void* actions) {
  PRONGHORN_ASSERT(split == 0 && begun_actions_ == nullptr);
  begun_actions_ = actions;
}

void BatchEnv::finish_step_unchecked(int64_t split, const StepOutput& out) {
  PRONGHORN_ASSERT(split == 0 && begun_actions_ != nullptr);
  step_unchecked(std::exchange(begun_actions_, nullptr), out);
}

// The fast path is one vectorised pass over rewards and observations, and
// over the final observation of each ended episode; only a failure pays for
// finding the row (report_non_finite).
void BatchEnv::check_finite(const char* call, const StepOutput& out, int64_t first,
                            int64_t rows) const {
  bool ok = out.rewards == nullptr || all_finite(out.rewards, rows);
  if (spec_.obs_dtype == Dtype::kFloat32) {
    const int64_t row = spec_.obs_elements();
    ok &= all_finite(static_cast<const float*>(out.obs), rows * row);
    if (out.final_obs != nullptr) {
      // Only the rows of ended episodes are the env's; the others are the caller's.
      const float* final_obs = static_cast<const float*>(out.final_obs);
      for_each_ended(out.terminated, out.truncated, rows,
                     [&](int64_t k) { ok &= all_finite(final_obs + k * row, row); });
    }
  }
  if (!ok) [[unlikely]] {
    report_non_finite(call, out, first, rows);
  }
}

void BatchEnv::report_non_finite(const char* call, const StepOutput& out, int64_t first,
                                 int64_t rows) const {
  auto describe = [](float v) {
    return std::isnan(v) ? std::string("NaN") : v > 0 ? std::string("inf") : std::string("-inf");
  };
  if (out.rewards != nullptr) {
    if (const int64_t i = first_non_finite(out.rewards, rows); i >= 0) {
      throw Error(fmt::format("{}: {} returned reward {} for env {}", label(), call,
                              describe(out.rewards[i]), first + i));
    }
  }
  const int64_t row = spec_.obs_elements();
  auto check_rows = [&](const void* obs, const char* what, int64_t from, int64_t end) {
    const float* x = static_cast<const float*>(obs) + from * row;
    if (const int64_t i = first_non_finite(x, (end - from) * row); i >= 0) {
      throw Error(fmt::format("{}: {} returned {} element {} = {} for env {}", label(), call, what,
                              i % row, describe(x[i]), first + from + i / row));
    }
  };
  PRONGHORN_ASSERT(spec_.obs_dtype == Dtype::kFloat32);
  check_rows(out.obs, "observation", 0, rows);
  if (out.final_obs != nullptr) {
    for_each_ended(out.terminated, out.truncated, rows,
                   [&](int64_t k) { check_rows(out.final_obs, "final observation", k, k + 1); });
  }
  PRONGHORN_ASSERT(false, "report_non_finite found nothing to report");
}

void BatchEnv::check_actions(const void* actions, int64_t first, int64_t rows) const {
  if (spec_.action_kind == ActionKind::kDiscrete) {
    const int32_t* a = static_cast<const int32_t*>(actions);
    // One pass that vectorises; the slow path only finds which row was bad.
    bool ok = true;
    for (int64_t i = 0; i < rows; ++i) ok &= (a[i] >= 0) & (a[i] < spec_.action_size);
    if (ok) return;
    for (int64_t i = 0; i < rows; ++i) {
      PRONGHORN_CHECK(a[i] >= 0 && a[i] < spec_.action_size, "env ", spec_.name, ": action ", a[i],
                      " of env ", first + i, " is out of range: expected 0 to ",
                      spec_.action_size - 1);
    }
    return;
  }
  const float* a = static_cast<const float*>(actions);
  const int64_t dims = spec_.action_size;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t d = 0; d < dims; ++d) {
      const float v = a[i * dims + d];
      PRONGHORN_CHECK(std::isfinite(v) && v >= spec_.action_low[d] && v <= spec_.action_high[d],
                      "env ", spec_.name, ": action[", d, "] = ", v, " of env ", first + i,
                      " is out of range: expected a finite value in [", spec_.action_low[d], ", ",
                      spec_.action_high[d], "]");
    }
  }
}

std::vector<EnvSpec> builtin_env_specs() {
  return {CartPole::make_spec(0), Pong::make_spec(0), Pendulum::make_spec(0), Memory::make_spec(0)};
}

std::unique_ptr<BatchEnv> make_builtin_env(const std::string& name, int64_t num_envs, uint64_t seed,
                                           int64_t max_episode_steps) {
  if (name == "cartpole") return std::make_unique<CartPole>(num_envs, seed, max_episode_steps);
  if (name == "pong") return std::make_unique<Pong>(num_envs, seed, max_episode_steps);
  if (name == "pendulum") return std::make_unique<Pendulum>(num_envs, seed, max_episode_steps);
  if (name == "memory") return std::make_unique<Memory>(num_envs, seed, max_episode_steps);
  std::vector<std::string> names;
  for (const EnvSpec& spec : builtin_env_specs()) names.push_back(spec.name);
  throw UsageError(fmt::format("env.name = \"{}\": no such built-in env{}; built-in envs are {}",
                               name, did_you_mean(name, names), fmt::join(names, ", ")));
}

void check_episode_info(const EnvConfig& config) {
  if (config.episode_info.empty() || is_python_env(config)) {
    return;
  }
  throw UsageError(fmt::format(
      "env.episode_info names {} key(s), but env {} is a {} env, which has no info: only a Python "
      "env's (\"gymnasium:\", \"envpool:\", \"python:\") reports numbers at its episodes' end",
      config.episode_info.size(), config.name, config.plugin.empty() ? "built-in" : "plugin"));
}

std::unique_ptr<BatchEnv> make_env(const EnvConfig& config, uint64_t seed) {
  check_episode_info(config);
  if (is_python_env(config)) {
    return PythonEnv::start(config, seed);
  }
  if (!config.plugin.empty()) {
    return PluginLibrary::open(config.plugin)
        ->make_env(config.name, config.num_envs, seed, config.max_episode_steps);
  }
  return make_builtin_env(config.name, config.num_envs, seed, config.max_episode_steps);
}

}  // namespace pronghorn::envs
