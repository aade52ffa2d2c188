# The reference a Python-hosted env is checked against (envs/python_env_test.cpp):
# K plain envs stepped in a plain Python loop, seeded as
# envs/python/pronghorn_worker.py documents it, and reset by hand when an
# episode ends. No vector env: the worker's SAME_STEP vector is what is
# checked.
#   ENV_ID "CartPole-v1": K envs of gymnasium.make; env i seeded
#     ((seed << 20) + i) mod 2^63 at its first reset.
#   OPTIONS with "vectorization_mode": "vector_entry_point" (ale-py's
#     AtariVectorEnv for ALE/<Game>-v5): K of the library's own vector envs
#     of one env each, SAME_STEP, env i's seeded as EnvPool's below (C ints).
#   ENV_ID "envpool:CartPole-v1": K EnvPool pools of one env each, pool i
#     seeded ((seed << 20) mod (2^31 - 2^20)) + i (EnvPool seeds env i of a pool with
#     seed + i); an ended env resets on its next step, as EnvPool's do.
#
#   gym_reference.py ENV_ID K SEED STEPS OPTIONS_JSON OUT_DIR
#
# Writes to OUT_DIR, as raw little-endian arrays, the step count leading:
#   actions.bin     int32 [STEPS, K] or float32 [STEPS, K, D] (drawn here)
#   obs.bin         [STEPS + 1, K, obs...] (the reset's, then each step's)
#   rewards.bin     float32 [STEPS, K] (the library's float64, cast)
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


class GymnasiumEnv:
    def __init__(self, env_id, seed, options):
        self.env, self.seed = gymnasium.make(env_id, **options), seed
        self.observation_space, self.action_space = self.env.observation_space, self.env.action_space

    def reset(self):
        return self.env.reset(seed=self.seed)[0]

    def step(self, action):
        """obs, reward, terminated, truncated, and the next episode's first obs if it ended."""
        obs, reward, terminated, truncated, _ = self.env.step(action)
        first = self.env.reset()[0] if terminated or truncated else None
        return obs, reward, terminated, truncated, first


class VectorOfOne:
    """The library's own vector env (vector_entry_point) of one env."""

    def __init__(self, env_id, seed, options):
        from gymnasium.vector import AutoresetMode

        self.vec = gymnasium.make_vec(env_id, num_envs=1, autoreset_mode=AutoresetMode.SAME_STEP,
                                      **options)
        self.seed = seed
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space

    def reset(self):
        return self.vec.reset(seed=self.seed)[0][0]

    def step(self, action):
        obs, reward, terminated, truncated, info = self.vec.step(np.asarray([action]))
        if terminated[0] or truncated[0]:
            return info["final_obs"][0], reward[0], terminated[0], truncated[0], obs[0]
        return obs[0], reward[0], terminated[0], truncated[0], None


class EnvPoolEnv:
    def __init__(self, task, seed, options):
        import envpool

        self.pool = envpool.make(task, env_type="gymnasium", num_envs=1, seed=seed, **options)
        self.observation_space, self.action_space = self.pool.observation_space, self.pool.action_space

    def reset(self):
        return self.pool.reset()[0][0]

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.pool.step(np.asarray([action]))
        first = None
        if terminated[0] or truncated[0]:
            first = self.pool.step(np.asarray([action]))[0][0]  # EnvPool's reset step
        return obs[0], reward[0], terminated[0], truncated[0], first


def make_envs(env_id, k, seed, options):
    pool_seed = (seed << 20) % (2**31 - 2**20)  # the worker's envpool_seed: C ints
    if env_id.startswith("envpool:"):
        return [EnvPoolEnv(env_id[len("envpool:"):], pool_seed + i, options) for i in range(k)]
    if env_id.startswith("ALE/"):
        import ale_py  # noqa: F401  (registers the ALE/ ids)
    if options.get("vectorization_mode") == "vector_entry_point":
        return [VectorOfOne(env_id, pool_seed + i, options) for i in range(k)]
    return [GymnasiumEnv(env_id, ((seed << 20) + i) & (2**63 - 1), options) for i in range(k)]


def main(env_id, k, seed, steps, options, out_dir):
    envs = make_envs(env_id, k, seed, options)
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
        obs[0, i] = env.reset()
    for t in range(steps):
        for i, env in enumerate(envs):
            o, r, term, trunc, first = env.step(actions[t, i])
            rewards[t, i], terminated[t, i], truncated[t, i] = r, term, trunc
            if first is not None:
                final_obs[t, i] = o
                o = first
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
