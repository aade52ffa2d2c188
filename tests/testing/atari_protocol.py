# Reads the Atari protocol back from the env a preset runs
# (envs/python_env_atari_test.cpp): the vector env the worker makes
# (envs/python/pronghorn_vector.py's make_vector) from a preset's env.name,
# env.options and env.max_episode_steps, asked what it runs.
#
#   atari_protocol.py NAME OPTIONS_JSON MAX_EPISODE_STEPS
#
# Prints one "name value" line per thing read:
#   envpool:<Game>-v5  EnvPool's own config of the running pool, every option
#                      by EnvPool's name, and "actions N".
#   gymnasium:ALE/...  ale-py's AtariVectorEnv keeps its options in its C++,
#                      with no getter; what the running env shows is read:
#     observation      dtype and shape ([stack, height, width]; a colour axis
#                      after them when not grayscale)
#     actions          its action count (Pong's minimal set is 6, the full 18)
#     frameskip        frames per agent step, from its info's frame_number
#     noop_frames_max  the most frames any of K envs played before its first
#                      observation (no-op starts), from episode_frame_number
#     sticky_actions   1 when its play differs from the same env's made with
#                      repeat_action_probability = 0 (ale-py's default), on
#                      the same seed and actions; else 0
#   Not shown by Pong: its frame cap until an episode reaches it (the ring
#   test with a lowered cap, AlePongIsCutAtItsFrameCapAsAlePyCutsIt, sees
#   it), life-loss ends (Pong has no lives), reward clipping (its rewards are
#   ±1) and fire resets (it serves by itself: play is the same either way).
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "envs", "python"))
import pronghorn_vector  # noqa: E402

K = 8
SEED = 11
STEPS = 200


def make(name, options, max_episode_steps):
    return pronghorn_vector.make_vector(name, options, K, max_episode_steps, SEED, 0)


def play(vec):
    """The observations of STEPS steps from one seeded reset, under fixed actions."""
    actions = np.random.default_rng(3).integers(0, vec.single_action_space.n, (STEPS, K))
    frames = [vec.reset(seed=SEED)[0]]
    for a in actions:
        frames.append(vec.step(a.astype(np.int64))[0])
    vec.close()
    return np.stack(frames)


def ale(name, options):
    vec = make(name, options, 0)
    space = vec.single_observation_space
    print("observation", space.dtype, list(space.shape))
    print("actions", vec.single_action_space.n)
    _, info = vec.reset(seed=SEED)
    print("noop_frames_max", int(np.max(info["episode_frame_number"])))
    before = np.asarray(info["frame_number"]).copy()
    _, _, _, _, info = vec.step(np.zeros(K, dtype=np.int64))
    skips = set((np.asarray(info["frame_number"]) - before).tolist())
    print("frameskip", skips.pop() if len(skips) == 1 else sorted(skips))
    vec.close()
    ours = play(make(name, options, 0))
    print("sticky_actions",
          int(not np.array_equal(ours, play(make(name, dict(options, repeat_action_probability=0.0), 0)))))


def envpool(name, options, max_episode_steps):
    vec = make(name, options, max_episode_steps)
    for key, value in sorted(vec.pool.config.items()):
        if isinstance(value, (bool, int, float, str)):
            print(key, json.dumps(value))
    print("actions", vec.single_action_space.n)


def main(name, options, max_episode_steps):
    if name.startswith("envpool:"):
        envpool(name, options, max_episode_steps)
    else:
        ale(name, options)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]))
