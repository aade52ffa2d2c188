// libpronghorn_envs.so: the built-in envs exported through the plugin C ABI
// (envs/pronghorn_env.h), so any tool can drive any env the same way, and so
// the ABI path is tested against envs whose trajectories are known.
#include <array>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "envs/env.h"
#include "envs/pronghorn_env.h"

struct pronghorn_env {
  std::unique_ptr<pronghorn::envs::BatchEnv> env;
};

namespace {

using pronghorn::envs::ActionKind;
using pronghorn::envs::EnvSpec;

// The C specs point into these, which live as long as the library.
struct Exported {
  std::vector<EnvSpec> specs = pronghorn::envs::builtin_env_specs();
  std::vector<pronghorn_env_spec> raw;
  pronghorn_env_plugin table{};

  Exported();
};

void write_error(char* error, size_t size, const char* message) {
  if (error != nullptr && size > 0) std::snprintf(error, size, "%s", message);
}

pronghorn_env* create(int32_t index, int64_t num_envs, uint64_t seed, int64_t max_episode_steps,
                      char* error, size_t error_size);

int reset(pronghorn_env* env, void* obs, char* error, size_t error_size) {
  try {
    env->env->reset(obs);
    return 0;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return 1;
  }
}

int step(pronghorn_env* env, const void* actions, void* obs, float* rewards, uint8_t* terminated,
         uint8_t* truncated, void* final_obs, char* error, size_t error_size) {
  try {
    env->env->step(actions, {obs, rewards, terminated, truncated, final_obs});
    return 0;
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return 1;
  }
}

void destroy(pronghorn_env* env) { delete env; }

Exported::Exported() {
  for (const EnvSpec& spec : specs) {
    pronghorn_env_spec r{};
    r.name = spec.name.c_str();
    r.obs_dtype = static_cast<int32_t>(spec.obs_dtype);
    r.obs_rank = static_cast<int32_t>(spec.obs_shape.size());
    for (size_t d = 0; d < spec.obs_shape.size(); ++d) r.obs_shape[d] = spec.obs_shape[d];
    r.action_kind = static_cast<int32_t>(spec.action_kind);
    r.action_size = spec.action_size;
    if (spec.action_kind == ActionKind::kContinuous) {
      r.action_low = spec.action_low.data();
      r.action_high = spec.action_high.data();
    }
    r.max_episode_steps = spec.max_episode_steps;
    raw.push_back(r);
  }
  table = {PRONGHORN_ENV_ABI_VERSION,
           static_cast<int32_t>(raw.size()),
           raw.data(),
           create,
           reset,
           step,
           destroy};
}

const Exported& exported() {
  static const Exported instance;
  return instance;
}

pronghorn_env* create(int32_t index, int64_t num_envs, uint64_t seed, int64_t max_episode_steps,
                      char* error, size_t error_size) {
  try {
    const auto& specs = exported().specs;
    if (index < 0 || index >= static_cast<int32_t>(specs.size())) {
      write_error(error, error_size, "spec index out of range");
      return nullptr;
    }
    return new pronghorn_env{
        pronghorn::envs::make_builtin_env(specs[index].name, num_envs, seed, max_episode_steps)};
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
    return nullptr;
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const pronghorn_env_plugin*
pronghorn_env_plugin_entry(void) {
  return &exported().table;
}

extern "C" __attribute__((visibility("default"))) int pronghorn_env_plugin_target(
    int32_t spec_index, double* target) {
  const auto& specs = exported().specs;
  if (spec_index < 0 || spec_index >= static_cast<int32_t>(specs.size())) return 0;
  *target = specs[spec_index].target_return;
  return *target != 0 ? 1 : 0;
}
