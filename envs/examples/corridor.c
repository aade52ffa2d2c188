/* An example env plugin in plain C: a corridor of `length` cells. The agent
 * starts in the middle and steps left (action 0) or right (action 1); reaching
 * the right end pays +1 and ends the episode, the left end ends it with 0, and
 * every step costs 0.01. Observation: float32[2] = (position / (length - 1),
 * steps / limit). Build it as a shared library against envs/pronghorn_env.h:
 *
 *     cc -shared -fPIC -I<pronghorn>/envs corridor.c -o libcorridor.so
 *     pronghorn envs --plugin ./libcorridor.so
 *
 * It also shows the error path: creating more than 1,000,000 envs, or asking
 * for a negative time limit, fails with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pronghorn_env.h"

enum { LENGTH = 9, DEFAULT_LIMIT = 50, MAX_ENVS = 1000000 };

struct pronghorn_env {
  int64_t num_envs;
  int64_t limit;
  int32_t* position; /* [K] */
  int64_t* steps;    /* [K] */
};

static void observe(const struct pronghorn_env* env, int64_t i, float* obs) {
  obs[2 * i] = (float)env->position[i] / (LENGTH - 1);
  obs[2 * i + 1] = (float)env->steps[i] / (float)env->limit;
}

static pronghorn_env* create(int32_t spec_index, int64_t num_envs, uint64_t seed,
                             int64_t max_episode_steps, char* error, size_t error_size) {
  (void)spec_index;
  (void)seed; /* the corridor is deterministic */
  if (num_envs > MAX_ENVS || max_episode_steps < 0) {
    snprintf(error, error_size, "corridor supports 1 to %d envs and a time limit >= 0", MAX_ENVS);
    return NULL;
  }
  struct pronghorn_env* env = calloc(1, sizeof *env);
  if (env == NULL) return NULL;
  env->num_envs = num_envs;
  env->limit = max_episode_steps > 0 ? max_episode_steps : DEFAULT_LIMIT;
  env->position = calloc((size_t)num_envs, sizeof *env->position);
  env->steps = calloc((size_t)num_envs, sizeof *env->steps);
  if (env->position == NULL || env->steps == NULL) {
    snprintf(error, error_size, "out of memory");
    free(env->position);
    free(env->steps);
    free(env);
    return NULL;
  }
  return env;
}

static int reset(pronghorn_env* env, void* obs, char* error, size_t error_size) {
  (void)error;
  (void)error_size;
  for (int64_t i = 0; i < env->num_envs; ++i) {
    env->position[i] = LENGTH / 2;
    env->steps[i] = 0;
    observe(env, i, obs);
  }
  return 0;
}

static int step(pronghorn_env* env, const void* actions, void* obs_out, float* rewards,
                uint8_t* terminated, uint8_t* truncated, void* final_obs, char* error,
                size_t error_size) {
  (void)error;
  (void)error_size;
  const int32_t* action = actions;
  float* obs = obs_out;
  for (int64_t i = 0; i < env->num_envs; ++i) {
    env->position[i] += action[i] == 1 ? 1 : -1;
    env->steps[i] += 1;
    int at_goal = env->position[i] == LENGTH - 1;
    rewards[i] = at_goal ? 1.0f : -0.01f;
    terminated[i] = at_goal || env->position[i] == 0;
    truncated[i] = env->steps[i] >= env->limit;
    observe(env, i, obs);
    if (terminated[i] || truncated[i]) {
      if (final_obs != NULL) memcpy((float*)final_obs + 2 * i, obs + 2 * i, 2 * sizeof(float));
      env->position[i] = LENGTH / 2;
      env->steps[i] = 0;
      observe(env, i, obs);
    }
  }
  return 0;
}

static void destroy(pronghorn_env* env) {
  free(env->position);
  free(env->steps);
  free(env);
}

static const pronghorn_env_spec kSpecs[] = {{
    .name = "corridor",
    .obs_dtype = PRONGHORN_DTYPE_FLOAT32,
    .obs_rank = 1,
    .obs_shape = {2},
    .action_kind = PRONGHORN_ACTION_DISCRETE,
    .action_size = 2,
    .max_episode_steps = DEFAULT_LIMIT,
}};

static const pronghorn_env_plugin kPlugin = {
    .abi_version = PRONGHORN_ENV_ABI_VERSION,
    .num_specs = 1,
    .specs = kSpecs,
    .create = create,
    .reset = reset,
    .step = step,
    .destroy = destroy,
};

const pronghorn_env_plugin* pronghorn_env_plugin_entry(void) { return &kPlugin; }

/* Solved: the goal in 4 steps, +1 − 4 · 0.01, nearly every episode. */
int pronghorn_env_plugin_target(int32_t spec_index, double* target) {
  (void)spec_index;
  *target = 0.95;
  return 1;
}
