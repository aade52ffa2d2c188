/* An env plugin that misbehaves in step(), for the supervisor's tests
 * (tests/actor_faults_test.cpp): its env.name says how. create(), reset()
 * and the first step always work, so the learner's probe of the env (which
 * steps it once, envs/plugin_probe.h) sees a good env; actors step it more.
 *
 *   segv   the second step writes through a null pointer (SIGSEGV)
 *   abort  the second step calls abort() (SIGABRT)
 *   exit   the second step calls exit(3), as a plugin that gives up might
 *   error  the second step fails with the message "reward NaN"
 *   hang   steps normally for 3 unrolls of 16 steps, then never returns
 *   flaky  every 50th step fails with the message "flaky step": each actor
 *          life commits unrolls first
 *   segv10 the second step writes through a null pointer, but only in a
 *          batch of exactly 10 envs (an evaluation's, never an actor's 16)
 *
 * Otherwise a dull env: obs float32[4] of zeros, two actions, reward 1,
 * episodes of 10 steps. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pronghorn_env.h"

enum { OBS = 4, EPISODE = 10, HANG_AFTER = 3 * 16, FLAKY_EVERY = 50 };
enum { SEGV, ABORT, EXIT, ERROR, HANG, FLAKY, SEGV_AT_10, NONE };

struct pronghorn_env {
  int32_t mode;
  int64_t num_envs;
  int64_t steps; /* step calls so far */
  int64_t* t;    /* [K] steps into the episode */
};

static pronghorn_env* create(int32_t spec_index, int64_t num_envs, uint64_t seed,
                             int64_t max_episode_steps, char* error, size_t error_size) {
  (void)seed;
  (void)max_episode_steps;
  struct pronghorn_env* env = calloc(1, sizeof *env);
  if (env != NULL) env->t = calloc((size_t)num_envs, sizeof *env->t);
  if (env == NULL || env->t == NULL) {
    snprintf(error, error_size, "out of memory");
    free(env);
    return NULL;
  }
  env->mode = spec_index;
  env->num_envs = num_envs;
  return env;
}

static int reset(pronghorn_env* env, void* obs, char* error, size_t error_size) {
  (void)error;
  (void)error_size;
  memset(obs, 0, sizeof(float) * OBS * (size_t)env->num_envs);
  memset(env->t, 0, sizeof *env->t * (size_t)env->num_envs);
  return 0;
}

static int step(pronghorn_env* env, const void* actions, void* obs, float* rewards,
                uint8_t* terminated, uint8_t* truncated, void* final_obs, char* error,
                size_t error_size) {
  (void)actions;
  (void)final_obs;
  env->steps += 1;
  const int32_t mode = env->mode == SEGV_AT_10 && env->num_envs == 10 ? SEGV : env->mode;
  switch (env->steps > 1 ? mode : NONE) {
    case SEGV: {
      volatile int* nowhere = NULL;
      *nowhere = 1;
      break;
    }
    case ABORT:
      abort();
    case EXIT:
      fprintf(stderr, "crashing_env: giving up\n");
      exit(3);
    case ERROR:
      snprintf(error, error_size, "reward NaN");
      return 1;
    case HANG:
      if (env->steps > HANG_AFTER) {
        for (;;) pause(); /* SIGTERM's handler returns here: only SIGKILL ends it */
      }
      break;
    case FLAKY:
      if (env->steps % FLAKY_EVERY == 0) {
        snprintf(error, error_size, "flaky step");
        return 1;
      }
      break;
  }
  memset(obs, 0, sizeof(float) * OBS * (size_t)env->num_envs);
  for (int64_t i = 0; i < env->num_envs; ++i) {
    rewards[i] = 1.0f;
    env->t[i] += 1;
    terminated[i] = env->t[i] >= EPISODE;
    truncated[i] = 0;
    if (terminated[i]) env->t[i] = 0;
  }
  return 0;
}

static void destroy(pronghorn_env* env) {
  free(env->t);
  free(env);
}

#define SPEC(label)                                                                         \
  {                                                                                         \
    .name = label, .obs_dtype = PRONGHORN_DTYPE_FLOAT32, .obs_rank = 1, .obs_shape = {OBS}, \
    .action_kind = PRONGHORN_ACTION_DISCRETE, .action_size = 2, .max_episode_steps = 0      \
  }

/* In the order of the modes above: the spec index is the mode. */
static const pronghorn_env_spec kSpecs[] = {SPEC("segv"),  SPEC("abort"), SPEC("exit"),
                                            SPEC("error"), SPEC("hang"),  SPEC("flaky"),
                                            SPEC("segv10")};

static const pronghorn_env_plugin kPlugin = {
    .abi_version = PRONGHORN_ENV_ABI_VERSION,
    .num_specs = 7,
    .specs = kSpecs,
    .create = create,
    .reset = reset,
    .step = step,
    .destroy = destroy,
};

const pronghorn_env_plugin* pronghorn_env_plugin_entry(void) { return &kPlugin; }
