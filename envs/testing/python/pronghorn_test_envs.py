# Users' own Python envs, as the tests of Python-hosted envs bring them
# (env.name = "python:pronghorn_test_envs:<callable>", this folder on
# PYTHONPATH): good ones, and one per defect a user's env can have.
import ctypes
import time

import gymnasium
import numpy as np
from gymnasium import spaces


class Walk(gymnasium.Env):
    """A walk on a line: obs (position, step), +1 reward at the right end,
    terminated at either end. `fail_at`: step raises there; `hang_at`: step
    never returns there; `crash_at`: step segfaults there (in C, as a broken
    extension would); `nan_at`: the reward is NaN there."""

    def __init__(self, length=5, fail_at=0, hang_at=0, crash_at=0, nan_at=0,
                 hang_in_reset=False):
        self.length, self.fail_at, self.hang_at = length, fail_at, hang_at
        self.hang_in_reset = hang_in_reset
        self.crash_at, self.nan_at = crash_at, nan_at
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = spaces.Discrete(2)
        self.position, self.steps = 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        while self.hang_in_reset:
            time.sleep(1)
        self.position = int(self.np_random.integers(-1, 2))
        self.steps = 0
        return self.observe(), {}

    def observe(self):
        return np.array([self.position, self.steps], np.float64)

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_at:
            raise ValueError(f"the walk fell off its line at step {self.steps}")
        if self.steps == self.hang_at:
            while True:
                time.sleep(1)
        if self.steps == self.crash_at:
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        self.position += 1 if action == 1 else -1
        ended = abs(self.position) >= self.length
        reward = float("nan") if self.steps == self.nan_at else float(self.position >= self.length)
        return self.observe(), reward, ended, False, {"distance": abs(self.position)}


def make_walk(**options):
    return Walk(**options)


class ScoredWalk(Walk):
    """A walk whose info, at an episode's end, holds its statistics as a
    user's env reports them (env.episode_info): "score" (10 × the steps,
    only when it ended at the right end), "stats"/"steps" (nested) and
    "won" (a bool). `score_as_text`: "score" is a string instead."""

    def __init__(self, score_as_text=False, **options):
        super().__init__(**options)
        self.score_as_text = score_as_text

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            won = self.position >= self.length
            if won:
                info["score"] = str(self.steps) if self.score_as_text else 10 * self.steps
            info["stats"] = {"steps": self.steps}
            info["won"] = won
        return obs, reward, terminated, truncated, info


def make_scored_walk(**options):
    return ScoredWalk(**options)


class PixelWalk(Walk):
    """The walk seen as uint8 frames [2, height, width]: channel 0 lights
    the position's column, channel 1 a row per step taken (for image models)."""

    def __init__(self, height=44, width=40, **options):
        super().__init__(**options)
        self.observation_space = spaces.Box(0, 255, (2, height, width), np.uint8)

    def observe(self):
        _, height, width = self.observation_space.shape
        frame = np.zeros((2, height, width), np.uint8)
        frame[0, :, (self.position + self.length) * (width - 1) // (2 * self.length)] = 255
        frame[1, min(self.steps, height - 1), :] = 128
        return frame


def make_pixel_walk(**options):
    return PixelWalk(**options)


def make_torch_walk(**options):
    """A walk whose observations PyTorch computes: a user's env may import it."""
    import torch

    class TorchWalk(Walk):
        def observe(self):
            return torch.tensor([self.position, self.steps], dtype=torch.float64).numpy()

    return TorchWalk(**options)


def make_dict_walk():
    env = Walk()
    env.observation_space = spaces.Dict({"position": spaces.Discrete(3)})
    return env


def make_next_step_vector(num_envs=2):
    """A vector env with Gymnasium's default autoreset (NEXT_STEP): refused."""
    return gymnasium.vector.SyncVectorEnv([Walk] * num_envs)


class BoundedWalk(Walk):
    """Pushed by a force within float64 bounds that float32 cannot hold
    exactly; it refuses any action outside its space."""

    def __init__(self):
        super().__init__()
        self.action_space = spaces.Box(-0.1, 0.1, (1,), np.float64)

    def step(self, action):
        assert self.action_space.contains(np.asarray(action, np.float64)), action
        return super().step(1 if action[0] > 0 else 0)


def make_bounded_walk():
    return BoundedWalk()


class ScalarRewardVector(gymnasium.vector.SyncVectorEnv):
    """A vector env that returns one reward for all its envs: refused."""

    def step(self, actions):
        obs, rewards, terminated, truncated, info = super().step(actions)
        return obs, float(rewards[0]), terminated, truncated, info


def make_scalar_reward_vector(num_envs=2):
    return ScalarRewardVector([Walk] * num_envs,
                              autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)


class ByteWalk(Walk):
    """A walk seen as bytes: a uint8 observation space."""

    def __init__(self):
        super().__init__()
        self.observation_space = spaces.Box(0, 255, (2,), np.uint8)

    def observe(self):
        return np.array([abs(self.position), min(self.steps, 255)], np.uint8)


class FloatFramesVector(gymnasium.vector.SyncVectorEnv):
    """A vector env of a uint8 space that steps floats: refused."""

    def step(self, actions):
        obs, rewards, terminated, truncated, info = super().step(actions)
        return obs.astype(np.float64), rewards, terminated, truncated, info


def make_float_frames_vector(num_envs=2):
    return FloatFramesVector([ByteWalk] * num_envs,
                             autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)


not_callable = 3
