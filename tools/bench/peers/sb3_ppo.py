"""Stable-Baselines3 PPO on CartPole-v1 with the RL Zoo's tuned hyperparameters,
read from the rl_zoo3 package's hyperparams/ppo.yml (the file is passed in;
rl_zoo3 itself is not imported). Ends when solved (episodes.py).

    python sb3_ppo.py SEED LIMIT_S PPO_YML
"""
import sys

import episodes

seed, limit_s, zoo_yml = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
episodes.watch(limit_s)

import yaml  # noqa: E402  (after the watch starts: imports count against the clock anyway)
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from zoo import schedule  # noqa: E402


with open(zoo_yml) as f:
    hyper = dict(yaml.load(f, Loader=yaml.UnsafeLoader)["CartPole-v1"])  # the Zoo's own loader
n_envs = hyper.pop("n_envs")
n_timesteps = int(hyper.pop("n_timesteps"))
policy = hyper.pop("policy")
unknown = {"normalize", "env_wrapper", "frame_stack", "policy_kwargs", "callback"} & hyper.keys()
if unknown:
    sys.exit(f"sb3_ppo: the Zoo's CartPole-v1 entry now has {sorted(unknown)}; teach this driver")
env = make_vec_env("CartPole-v1", n_envs=n_envs, seed=seed, wrapper_class=episodes.Monitor)
model = PPO(policy, env, seed=seed, device="cpu", verbose=0,
            **{key: schedule(value) for key, value in hyper.items()})
model.learn(total_timesteps=n_timesteps)
episodes.ended()
