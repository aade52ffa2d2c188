/* Broken env plugins for the tests: one source, built once per defect (see
 * envs/CMakeLists.txt), each a way a user's plugin can go wrong. Without a
 * defect it is a plain env: obs float32[3] of zeros, reward 0, episodes that
 * never end.
 *   BAD_ABI       claims ABI version 99
 *   NO_ENTRY      exports no entry symbol
 *   BAD_SPEC      a spec with obs_rank 0
 *   NO_STEP       a table without a step function
 *   FAILING       create works, step fails with a message; create fails for K > 8
 *   SEGV_CREATE   create dereferences a null pointer
 *   SEGV_DESTROY  destroy dereferences a null pointer
 *   HANG_CREATE   create never returns
 *   BAD_FLAGS     step sets terminated to 7
 *   MANY_SPECS    num_specs 1000 with a 1-element specs array (garbage after it)
 *   OVERRUN       step writes one observation row past the end of obs
 *   NAN_REWARD    step returns reward NaN for env 3 (so K = 1 looks fine)
 *   INF_OBS       step returns obs element 2 = inf for env 1 (so K = 1 looks fine) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pronghorn_env.h"

enum { OBS = 3 };

struct pronghorn_env {
  int64_t num_envs;
};

/* A real fault, not a raise(): the compiler cannot see the pointer is null. */
static void crash(void) {
  volatile int* volatile nowhere = NULL;
  *nowhere = 1;
}

static pronghorn_env* create(int32_t spec_index, int64_t num_envs, uint64_t seed,
                             int64_t max_episode_steps, char* error, size_t error_size) {
  (void)spec_index, (void)seed, (void)max_episode_steps;
#ifdef SEGV_CREATE
  crash();
#endif
#ifdef HANG_CREATE
  for (;;) sleep(1);
#endif
#ifdef FAILING
  if (num_envs > 8) {
    snprintf(error, error_size, "at most 8 envs, asked for %lld", (long long)num_envs);
    return NULL;
  }
#else
  (void)error, (void)error_size;
#endif
  pronghorn_env* env = calloc(1, sizeof(struct pronghorn_env));
  if (env != NULL) env->num_envs = num_envs;
  return env;
}

static int reset(pronghorn_env* env, void* obs, char* error, size_t error_size) {
  (void)error, (void)error_size;
  memset(obs, 0, sizeof(float) * OBS * (size_t)env->num_envs);
  return 0;
}

static int step(pronghorn_env* env, const void* actions, void* obs, float* rewards,
                uint8_t* terminated, uint8_t* truncated, void* final_obs, char* error,
                size_t error_size) {
  (void)actions, (void)final_obs;
#ifdef FAILING
  (void)env, (void)obs, (void)rewards, (void)terminated, (void)truncated;
  snprintf(error, error_size, "the simulator lost its licence");
  return 1;
#else
  (void)error, (void)error_size;
  const int64_t k = env->num_envs;
  float* o = obs;
#ifdef OVERRUN
  memset(o, 0, sizeof(float) * OBS * (size_t)(k + 1));
#else
  memset(o, 0, sizeof(float) * OBS * (size_t)k);
#endif
  for (int64_t i = 0; i < k; ++i) {
    rewards[i] = 0;
    terminated[i] = 0;
    truncated[i] = 0;
  }
#ifdef BAD_FLAGS
  terminated[0] = 7;
#endif
#ifdef NAN_REWARD
  if (k > 3) rewards[3] = NAN;
#endif
#ifdef INF_OBS
  if (k > 1) o[OBS * 1 + 2] = INFINITY;
#endif
  return 0;
#endif
}

static void destroy(pronghorn_env* env) {
#ifdef SEGV_DESTROY
  crash();
#endif
  free(env);
}

#define SPEC                                                                                      \
  {                                                                                               \
    .name = "broken", .obs_dtype = PRONGHORN_DTYPE_FLOAT32, .obs_rank = RANK, .obs_shape = {OBS}, \
    .action_kind = PRONGHORN_ACTION_DISCRETE, .action_size = 2,                                   \
  }
#ifdef BAD_SPEC
#define RANK 0
#else
#define RANK 1
#endif

#ifdef MANY_SPECS
/* What lies past the end of a too-short array is whatever the linker put
 * there; here it is bytes of 0xAB, so the test knows what it reads. */
static const struct {
  pronghorn_env_spec one[1];
  unsigned char garbage[4 * sizeof(pronghorn_env_spec)];
} kSpecsAndMore = {{SPEC}, {[0 ... 4 * sizeof(pronghorn_env_spec) - 1] = 0xAB}};
#define SPECS kSpecsAndMore.one
#define NUM_SPECS 1000
#else
static const pronghorn_env_spec kSpecs[] = {SPEC};
#define SPECS kSpecs
#define NUM_SPECS 1
#endif

static const pronghorn_env_plugin kPlugin = {
#ifdef BAD_ABI
    .abi_version = 99,
#else
    .abi_version = PRONGHORN_ENV_ABI_VERSION,
#endif
    .num_specs = NUM_SPECS,
    .specs = SPECS,
    .create = create,
    .reset = reset,
#ifndef NO_STEP
    .step = step,
#endif
    .destroy = destroy,
};

#ifdef NAN_TARGET
int pronghorn_env_plugin_target(int32_t spec_index, double* target) {
  (void)spec_index;
  *target = __builtin_nan("");
  return 1;
}
#endif

#ifndef NO_ENTRY
const pronghorn_env_plugin* pronghorn_env_plugin_entry(void) { return &kPlugin; }
#else
const pronghorn_env_plugin* some_other_symbol(void) { return &kPlugin; }
#endif
