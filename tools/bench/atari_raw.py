"""An Atari preset's envs stepped by their library's own vector loop, in plain
Python, with random actions: the baseline `tools/bench-atari --raw` puts
Pronghorn's env host beside (`pronghorn bench env --config PRESET`). The
preset's [env] options are passed as they are: ale-py's vector env through
gymnasium.make_vec (its "vector_entry_point"), EnvPool's through envpool.make.

    python atari_raw.py PRESET.toml K SECONDS

Prints one number: agent steps per second (frames = 4 x).
"""
import sys
import time
import tomllib

import numpy as np


def make(env):
    kind, _, task = env["name"].partition(":")
    options = dict(env.get("options", {}))
    k = int(sys.argv[2])
    if kind == "envpool":
        import envpool
        return envpool.make(task, env_type="gymnasium", num_envs=k, seed=1, **options)
    import ale_py  # noqa: F401  (registers the ALE/ ids)
    import gymnasium
    mode = options.pop("vectorization_mode")
    return gymnasium.make_vec(task, num_envs=k, vectorization_mode=mode, **options)


def main():
    with open(sys.argv[1], "rb") as f:
        env = tomllib.load(f)["env"]
    k, seconds = int(sys.argv[2]), float(sys.argv[3])
    vec = make(env)
    envpool = env["name"].startswith("envpool:")
    if envpool:
        vec.reset()  # seeded at make
    else:
        vec.reset(seed=1)
    rng = np.random.default_rng(1)
    n = (vec.action_space if envpool else vec.single_action_space).n  # one env's actions
    rows = [rng.integers(0, n, size=k).astype(np.int32) for _ in range(64)]
    for i in range(20):  # warm-up
        vec.step(rows[i % 64])
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        vec.step(rows[steps // k % 64])
        steps += k
    print(f"{steps / (time.perf_counter() - start):.1f}")


if __name__ == "__main__":
    main()
