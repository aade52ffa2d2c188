# The reference a Python-hosted env is checked against (envs/python_env_test.cpp):
# K plain Gymnasium envs stepped in a plain Python loop, each made with
# gymnasium.make, seeded as envs/python/pronghorn_worker.py documents it
# (env i: ((seed << 20) + i) mod 2^63) and reset by hand when its episode
# ends. No vector env: the worker's SAME_STEP vector is what is checked.
#
#   gym_reference.py ENV_ID K SEED STEPS OPTIONS_JSON OUT_DIR
#
# Writes to OUT_DIR, as raw little-endian arrays, the step count leading:
#   actions.bin     int32 [STEPS, K] or float32 [STEPS, K, D] (drawn here)
#   obs.bin         [STEPS + 1, K, obs...] (the reset's, then each step's)
#   rewards.bin     float32 [STEPS, K] (Gymnasium's float64, cast)
#   terminated.bin  uint8 [STEPS, K]
#   truncated.bin   uint8 [STEPS, K]
#   final_obs.bin   [STEPS, K, obs...] (zero where the episode did not end)
# and prints "terminations T_min truncations U_min": the fewest of each any
# one env had, for the test to check the actions covered both.
import json
import os
import sys

import gymnasium
import numpy as np


def main(env_id, k, seed, steps, options, out_dir):
    envs = [gymnasium.make(env_id, **options) for _ in range(k)]
    obs_dtype = np.uint8 if envs[0].observation_space.dtype == np.uint8 else np.float32
    obs_shape = envs[0].observation_space.shape
    space = envs[0].action_space
    draw = np.random.default_rng(1234)
    if isinstance(space, gymnasium.spaces.Discrete):
        actions = draw.integers(0, space.n, size=(steps, k)).astype(np.int32)
    else:
        actions = draw.uniform(space.low, space.high, size=(steps, k, *space.shape))
        actions = actions.astype(np.float32)

    obs = np.zeros((steps + 1, k, *obs_shape), obs_dtype)
    final_obs = np.zeros((steps, k, *obs_shape), obs_dtype)
    rewards = np.zeros((steps, k), np.float32)
    terminated = np.zeros((steps, k), np.uint8)
    truncated = np.zeros((steps, k), np.uint8)
    for i, env in enumerate(envs):
        obs[0, i], _ = env.reset(seed=((seed << 20) + i) & (2**63 - 1))
    for t in range(steps):
        for i, env in enumerate(envs):
            o, r, term, trunc, _ = env.step(actions[t, i])
            rewards[t, i], terminated[t, i], truncated[t, i] = r, term, trunc
            if term or trunc:
                final_obs[t, i] = o
                o, _ = env.reset()
            obs[t + 1, i] = o

    os.makedirs(out_dir, exist_ok=True)
    for name, array in [("actions", actions), ("obs", obs), ("rewards", rewards),
                        ("terminated", terminated), ("truncated", truncated),
                        ("final_obs", final_obs)]:
        np.ascontiguousarray(array).tofile(os.path.join(out_dir, name + ".bin"))
    print(f"terminations {int(terminated.sum(axis=0).min())} "
          f"truncations {int(truncated.sum(axis=0).min())}")


if __name__ == "__main__":
    env_id, k, seed, steps, options, out_dir = sys.argv[1:]
    main(env_id, int(k), int(seed), int(steps), json.loads(options), out_dir)
