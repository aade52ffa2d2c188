/* Broken env plugins for envs/plugin_test.cpp: one source, built once per
 * defect (see envs/CMakeLists.txt), each a way a user's plugin can go wrong.
 *   BAD_ABI       claims ABI version 99
 *   NO_ENTRY      exports no entry symbol
 *   BAD_SPEC      a spec with obs_rank 0
 *   NO_STEP       a table without a step function
 *   FAILING       create works, step fails with a message; create fails for K > 8 */
#include <stdio.h>
#include <stdlib.h>

#include "pronghorn_env.h"

struct pronghorn_env {
  int unused;
};

static pronghorn_env* create(int32_t spec_index, int64_t num_envs, uint64_t seed,
                             int64_t max_episode_steps, char* error, size_t error_size) {
  (void)spec_index, (void)seed, (void)max_episode_steps;
  if (num_envs > 8) {
    snprintf(error, error_size, "at most 8 envs, asked for %lld", (long long)num_envs);
    return NULL;
  }
  return calloc(1, sizeof(struct pronghorn_env));
}

static int reset(pronghorn_env* env, void* obs, char* error, size_t error_size) {
  (void)env, (void)obs, (void)error, (void)error_size;
  return 0;
}

static int step(pronghorn_env* env, const void* actions, void* obs, float* rewards,
                uint8_t* terminated, uint8_t* truncated, void* final_obs, char* error,
                size_t error_size) {
  (void)env, (void)actions, (void)obs, (void)rewards, (void)terminated, (void)truncated,
      (void)final_obs;
  snprintf(error, error_size, "the simulator lost its licence");
  return 1;
}

static void destroy(pronghorn_env* env) { free(env); }

static const pronghorn_env_spec kSpecs[] = {{
    .name = "broken",
    .obs_dtype = PRONGHORN_DTYPE_FLOAT32,
#ifdef BAD_SPEC
    .obs_rank = 0,
#else
    .obs_rank = 1,
#endif
    .obs_shape = {3},
    .action_kind = PRONGHORN_ACTION_DISCRETE,
    .action_size = 2,
}};

static const pronghorn_env_plugin kPlugin = {
#ifdef BAD_ABI
    .abi_version = 99,
#else
    .abi_version = PRONGHORN_ENV_ABI_VERSION,
#endif
    .num_specs = 1,
    .specs = kSpecs,
    .create = create,
    .reset = reset,
#ifndef NO_STEP
    .step = step,
#endif
    .destroy = destroy,
};

#ifndef NO_ENTRY
const pronghorn_env_plugin* pronghorn_env_plugin_entry(void) { return &kPlugin; }
#else
const pronghorn_env_plugin* some_other_symbol(void) { return &kPlugin; }
#endif
