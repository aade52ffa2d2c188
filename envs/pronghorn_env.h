/* Pronghorn env plugin C ABI, version 1.
 *
 * A user env is a shared library that exports one C symbol,
 *
 *     const pronghorn_env_plugin* pronghorn_env_plugin_entry(void);
 *
 * returning a static table: the ABI version it was built against, the specs of
 * the envs it offers, and five functions. Pronghorn loads it with dlopen
 * (`env.plugin = "path/libmyenv.so"`), checks the version and every spec, and
 * then steps K envs per call. The built-in envs are exported the same way from
 * libpronghorn_envs.so, and envs/examples/corridor.c is a complete plugin.
 *
 * Contract of a batch of K envs (all buffers are the caller's, row-major, one
 * row per env; the plugin must not keep pointers to them):
 *   obs        [K, obs_shape...] of obs_dtype
 *   actions    discrete: int32 [K], each in [0, action_size);
 *              continuous: float32 [K, action_size], each in [low, high].
 *              Pronghorn checks actions before calling step.
 *   rewards    float32 [K]; terminated, truncated uint8 [K] (0 or 1)
 *   final_obs  [K, obs_shape...] or NULL.
 * step() resets every env whose episode ended, by itself: the obs written for
 * that env is the first observation of its next episode. The ended episode's
 * last observation goes to final_obs (when not NULL), in that env's row only;
 * the other rows of final_obs are left alone. `terminated` means the episode
 * reached a terminal state (no bootstrap); `truncated` means a time limit cut
 * it (bootstrap from final_obs). Both may be set on the same step.
 * The same seed gives the same trajectories for the same actions.
 *
 * Errors: create returns NULL, and reset/step return non-zero, after writing
 * a NUL-terminated message into `error` (at most error_size bytes).
 *
 * What Pronghorn checks, so that a faulty plugin ends the job with one error
 * naming the library instead of corrupting training data:
 *   - The table: num_specs is 1 to PRONGHORN_ENV_MAX_SPECS and `specs` holds
 *     that many entries; every spec's fields are checked (a num_specs larger
 *     than the array shows up as a spec of garbage), and a name is 1 to
 *     PRONGHORN_ENV_MAX_NAME printable ASCII characters.
 *   - Buffers: reset and step write only inside the buffers above, at their
 *     sizes for the K of create, and `error` within error_size bytes. The
 *     buffers a plugin is given are Pronghorn's own, with guard bytes on both
 *     sides, checked after every call; the results are copied to the caller
 *     only after they pass. A write past either end is an error naming the
 *     buffer. (A write far beyond a guard is not caught; it is still a bug.)
 *   - terminated and truncated are each 0 or 1, for every env.
 *   - rewards and float32 observations (final_obs too) are finite: a NaN or
 *     an inf is an error naming the env row.
 *   - Before a job starts, one env (K = 1) is created, reset, stepped once and
 *     destroyed in a child process: a plugin that crashes or hangs there
 *     fails the job at start with the signal or the call that hung
 *     (PRONGHORN_ENV_PROBE_TIMEOUT_S, default 60 s), and cannot take the
 *     learner with it. Actor processes then load the plugin themselves.
 */
#ifndef PRONGHORN_ENV_H_
#define PRONGHORN_ENV_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRONGHORN_ENV_ABI_VERSION 1u
#define PRONGHORN_ENV_MAX_RANK 4
#define PRONGHORN_ENV_MAX_ACTION_DIMS 64
#define PRONGHORN_ENV_MAX_SPECS 1024
#define PRONGHORN_ENV_MAX_NAME 64
#define PRONGHORN_ENV_ENTRY "pronghorn_env_plugin_entry"

enum { PRONGHORN_DTYPE_FLOAT32 = 0, PRONGHORN_DTYPE_UINT8 = 1 };
enum { PRONGHORN_ACTION_DISCRETE = 0, PRONGHORN_ACTION_CONTINUOUS = 1 };

typedef struct pronghorn_env_spec {
  const char* name;  /* unique within the plugin, e.g. "corridor" */
  int32_t obs_dtype; /* PRONGHORN_DTYPE_* */
  int32_t obs_rank;  /* 1..PRONGHORN_ENV_MAX_RANK */
  int64_t obs_shape[PRONGHORN_ENV_MAX_RANK];
  int32_t action_kind;     /* PRONGHORN_ACTION_* */
  int64_t action_size;     /* discrete: number of actions; continuous: dims */
  const float* action_low; /* continuous: [action_size]; discrete: NULL */
  const float* action_high;
  int64_t max_episode_steps; /* default time limit; 0 = none */
} pronghorn_env_spec;

typedef struct pronghorn_env pronghorn_env; /* the plugin's own state, opaque */

typedef struct pronghorn_env_plugin {
  uint32_t abi_version;            /* PRONGHORN_ENV_ABI_VERSION the plugin was built with */
  int32_t num_specs;               /* 1..PRONGHORN_ENV_MAX_SPECS */
  const pronghorn_env_spec* specs; /* [num_specs] */

  /* K = num_envs envs of specs[spec_index]. max_episode_steps: 0 keeps the spec's. */
  pronghorn_env* (*create)(int32_t spec_index, int64_t num_envs, uint64_t seed,
                           int64_t max_episode_steps, char* error, size_t error_size);
  /* Starts a new episode in every env; writes obs. */
  int (*reset)(pronghorn_env* env, void* obs, char* error, size_t error_size);
  int (*step)(pronghorn_env* env, const void* actions, void* obs, float* rewards,
              uint8_t* terminated, uint8_t* truncated, void* final_obs, char* error,
              size_t error_size);
  void (*destroy)(pronghorn_env* env);
} pronghorn_env_plugin;

typedef const pronghorn_env_plugin* (*pronghorn_env_plugin_entry_fn)(void);
/* Optional, beside the entry point: the mean return that counts as solved for
 * specs[spec_index], which run.target_return = "auto" then stops at:
 *
 *     int pronghorn_env_plugin_target(int32_t spec_index, double* target);
 *
 * returns 1 after writing a finite *target, 0 where that env declares none. A
 * plugin without the symbol declares none (its runs stop at run.total_steps
 * unless run.target_return is set). Same ABI version: older plugins load. */
#define PRONGHORN_ENV_TARGET "pronghorn_env_plugin_target"
typedef int (*pronghorn_env_plugin_target_fn)(int32_t spec_index, double* target);

#ifdef __cplusplus
}
#endif

#endif /* PRONGHORN_ENV_H_ */
