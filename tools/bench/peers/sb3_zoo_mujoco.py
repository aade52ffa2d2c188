"""Stable-Baselines3 PPO on a Gymnasium MuJoCo env with the RL Zoo's tuned
hyperparameters (rl_zoo3's hyperparams/ppo.yml, passed in; rl_zoo3 itself is
not imported), then the final policy evaluated by issue 35's protocol: the
deterministic action, VecNormalize's statistics frozen, EPISODES full
episodes seeded EVAL_SEED, EVAL_SEED + 1, ...

The Zoo tunes the -v3/-v4 envs; a -v5 env takes the entry of the newest of
those it has (the driver says which). Prints one JSON line: the entry used,
the evaluation's returns and mean, the training's wall and CPU seconds (this
process and its children) and env steps.

    python sb3_zoo_mujoco.py ENV_ID SEED PPO_YML EVAL_SEED EPISODES [STEPS]
"""
import json
import os
import sys
import time

start = time.time()
env_id, seed, zoo_yml = sys.argv[1], int(sys.argv[2]), sys.argv[3]
eval_seed, episodes = int(sys.argv[4]), int(sys.argv[5])
steps_override = int(float(sys.argv[6])) if len(sys.argv) > 6 else None

import gymnasium as gym  # noqa: E402
import torch.nn as nn  # noqa: E402,F401  (the Zoo's policy_kwargs name nn.ReLU)
import yaml  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import VecNormalize  # noqa: E402
from zoo import schedule  # noqa: E402


def zoo_entry(table):
    base, version = env_id.rsplit("-v", 1)
    for v in [int(version)] + list(range(int(version) - 1, 0, -1)):
        if f"{base}-v{v}" in table:
            return f"{base}-v{v}", dict(table[f"{base}-v{v}"])
    sys.exit(f"sb3_zoo_mujoco: ppo.yml has no entry for {base} at v{version} or older")


with open(zoo_yml) as f:
    entry, hyper = zoo_entry(yaml.load(f, Loader=yaml.UnsafeLoader))  # the Zoo's own loader
n_envs = hyper.pop("n_envs", 1)
n_timesteps = steps_override or int(hyper.pop("n_timesteps"))
hyper.pop("n_timesteps", None)
policy = hyper.pop("policy")
normalize = hyper.pop("normalize", False)
if isinstance(normalize, str):  # "dict(norm_obs=True, norm_reward=False)", as the Zoo writes it
    normalize = eval(normalize)
normalize_kwargs = normalize if isinstance(normalize, dict) else {}
if "policy_kwargs" in hyper and isinstance(hyper["policy_kwargs"], str):
    hyper["policy_kwargs"] = eval(hyper["policy_kwargs"])  # as the Zoo does
unknown = {"env_wrapper", "frame_stack", "callback", "vec_env_wrapper"} & hyper.keys()
if unknown:
    sys.exit(f"sb3_zoo_mujoco: the Zoo's {entry} entry has {sorted(unknown)}; teach this driver")

env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
if normalize:
    # The Zoo's own construction: its normalize options, the entry's discount
    # (that of the return it normalises rewards by) over theirs.
    kwargs = dict(normalize_kwargs)
    if "gamma" in hyper:
        kwargs["gamma"] = hyper["gamma"]
    env = VecNormalize(env, **kwargs)
model = PPO(policy, env, seed=seed, device="cpu", verbose=0,
            **{key: schedule(value) for key, value in hyper.items()})
model.learn(total_timesteps=n_timesteps)
trained = time.time()
usage = os.times()
cpu_s = usage.user + usage.system + usage.children_user + usage.children_system

# Evaluation: one env, the statistics frozen, rewards unnormalised.
returns = []
if normalize:
    env.training = False  # VecNormalize.normalize_obs then applies its statistics, frozen
eval_env = gym.make(env_id)
for episode in range(episodes):
    obs, _ = eval_env.reset(seed=eval_seed + episode)
    total, done = 0.0, False
    while not done:
        if normalize:
            obs = env.normalize_obs(obs)
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, _ = eval_env.step(action)
        total += float(reward)
        done = terminated or truncated
    returns.append(total)
print(json.dumps({"entry": entry, "env": env_id, "seed": seed, "env_steps": model.num_timesteps,
                  "wall_s": round(trained - start, 1), "cpu_s": round(cpu_s, 1),
                  "eval_mean": sum(returns) / len(returns), "returns": returns}), flush=True)
