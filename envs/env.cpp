#include "envs/env.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "core/error.h"
#include "core/suggest.h"
#include "envs/cartpole.h"
#include "envs/pendulum.h"
#include "envs/plugin.h"
#include "envs/pong.h"

namespace pronghorn::envs {

BatchEnv::BatchEnv(EnvSpec spec, int64_t num_envs) : spec_(std::move(spec)), num_envs_(num_envs) {
  PRONGHORN_CHECK(num_envs >= 1, "env ", spec_.name, ": num_envs = ", num_envs,
                  ": expected at least 1");
}

void BatchEnv::reset(void* obs) {
  reset_unchecked(obs);
  started_ = true;
}

void BatchEnv::step(const void* actions, const StepOutput& out) {
  PRONGHORN_CHECK(started_, "env ", spec_.name, ": step() before reset()");
  check_actions(actions);
  step_unchecked(actions, out);
}

void BatchEnv::check_actions(const void* actions) const {
  if (spec_.action_kind == ActionKind::kDiscrete) {
    const int32_t* a = static_cast<const int32_t*>(actions);
    // One pass that vectorises; the slow path only finds which row was bad.
    bool ok = true;
    for (int64_t i = 0; i < num_envs_; ++i) ok &= (a[i] >= 0) & (a[i] < spec_.action_size);
    if (ok) return;
    for (int64_t i = 0; i < num_envs_; ++i) {
      PRONGHORN_CHECK(a[i] >= 0 && a[i] < spec_.action_size, "env ", spec_.name, ": action ",
                      a[i], " of env ", i, " is out of range: expected 0 to ",
                      spec_.action_size - 1);
    }
    return;
  }
  const float* a = static_cast<const float*>(actions);
  const int64_t dims = spec_.action_size;
  for (int64_t i = 0; i < num_envs_; ++i) {
    for (int64_t d = 0; d < dims; ++d) {
      const float v = a[i * dims + d];
      PRONGHORN_CHECK(std::isfinite(v) && v >= spec_.action_low[d] && v <= spec_.action_high[d],
                      "env ", spec_.name, ": action[", d, "] = ", v, " of env ", i,
                      " is out of range: expected a finite value in [", spec_.action_low[d], ", ",
                      spec_.action_high[d], "]");
    }
  }
}

std::vector<EnvSpec> builtin_env_specs() {
  return {CartPole::make_spec(0), Pong::make_spec(0), Pendulum::make_spec(0)};
}

std::unique_ptr<BatchEnv> make_builtin_env(const std::string& name, int64_t num_envs,
                                           uint64_t seed, int64_t max_episode_steps) {
  if (name == "cartpole") return std::make_unique<CartPole>(num_envs, seed, max_episode_steps);
  if (name == "pong") return std::make_unique<Pong>(num_envs, seed, max_episode_steps);
  if (name == "pendulum") return std::make_unique<Pendulum>(num_envs, seed, max_episode_steps);
  std::vector<std::string> names;
  for (const EnvSpec& spec : builtin_env_specs()) names.push_back(spec.name);
  throw UsageError(fmt::format("env.name = \"{}\": no such built-in env{}; built-in envs are {}",
                               name, did_you_mean(name, names), fmt::join(names, ", ")));
}

std::unique_ptr<BatchEnv> make_env(const EnvConfig& config, uint64_t seed) {
  if (!config.plugin.empty()) {
    return PluginLibrary::open(config.plugin)
        ->make_env(config.name, config.num_envs, seed, config.max_episode_steps);
  }
  return make_builtin_env(config.name, config.num_envs, seed, config.max_episode_steps);
}

}  // namespace pronghorn::envs
