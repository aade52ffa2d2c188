"""Stable-Baselines3 PPO with the RL Zoo's tuned settings (rl_zoo3's
hyperparams/ppo.yml, passed in; rl_zoo3 itself is not imported) on a
Gymnasium env, trained until the first evaluation whose EPISODES
deterministic episodes average at least TARGET: SB3's own EvalCallback every
EVAL_EVERY env steps (counted over all the Zoo's n_envs envs), stopped by
StopTrainingOnRewardThreshold. Issue 33's LunarLander race: the time is from
this process's start (imports included) to that evaluation's end.

The evaluation steps EVAL_ENVS envs as one vector (SB3's evaluate_policy
spreads the episodes over them evenly). Default 1; tools/bench-lunarlander
passes 32, as many as Pronghorn's evaluation steps at once. Either way
LunarLander's evaluations are most of a run's time: they are bound by the
env's own step.

Prints one JSON line: solved or not, the seconds and env steps at the
solving evaluation (or at the end), every evaluation's (env steps, mean),
the seconds spent evaluating, the process's CPU seconds and PyTorch's threads.

    python sb3_zoo_solve.py ENV_ID SEED PPO_YML TARGET EVAL_EVERY EPISODES [EVAL_ENVS [MAX_STEPS]]
"""
import json
import os
import sys
import time

start = time.time()
env_id, seed, zoo_yml = sys.argv[1], int(sys.argv[2]), sys.argv[3]
target, eval_every, episodes = float(sys.argv[4]), int(float(sys.argv[5])), int(sys.argv[6])
eval_envs = int(sys.argv[7]) if len(sys.argv) > 7 else 1
max_steps = int(float(sys.argv[8])) if len(sys.argv) > 8 else None

import torch  # noqa: E402
import yaml  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import (  # noqa: E402
    EvalCallback, StopTrainingOnRewardThreshold)
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from zoo import schedule  # noqa: E402

with open(zoo_yml) as f:
    table = yaml.load(f, Loader=yaml.UnsafeLoader)  # the Zoo's own loader
if env_id not in table:
    sys.exit(f"sb3_zoo_solve: ppo.yml has no entry for {env_id}")
hyper = dict(table[env_id])
n_envs = hyper.pop("n_envs", 1)
steps = max_steps or int(hyper.pop("n_timesteps"))
hyper.pop("n_timesteps", None)
policy = hyper.pop("policy")
unknown = {"normalize", "env_wrapper", "frame_stack", "callback", "vec_env_wrapper",
           "policy_kwargs"} & hyper.keys()
if unknown:
    sys.exit(f"sb3_zoo_solve: the Zoo's {env_id} entry has {sorted(unknown)}; teach this driver")
for key in ("learning_rate", "clip_range"):
    if key in hyper:
        hyper[key] = schedule(hyper[key])

env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
eval_env = make_vec_env(env_id, n_envs=eval_envs, seed=seed + 1000)
evaluations = []


class Recorder(EvalCallback):
    """EvalCallback that also keeps (env steps, mean, seconds) of each evaluation
    and the seconds spent in them."""

    evaluating_s = 0.0

    def _on_step(self):
        began = time.time()
        go_on = super()._on_step()
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:  # it evaluated just now
            self.evaluating_s += time.time() - began
            evaluations.append((self.num_timesteps, float(self.last_mean_reward),
                                round(time.time() - start, 1)))
        return go_on


stop = StopTrainingOnRewardThreshold(reward_threshold=target, verbose=0)
callback = Recorder(eval_env, callback_on_new_best=stop, n_eval_episodes=episodes,
                    eval_freq=max(eval_every // n_envs, 1), deterministic=True, verbose=0)
model = PPO(policy, env, seed=seed, verbose=0, **hyper)
model.learn(total_timesteps=steps, callback=callback)
solved = bool(evaluations) and evaluations[-1][1] >= target
times = os.times()
print(json.dumps({
    "system": "sb3-zoo", "env": env_id, "seed": seed, "solved": solved,
    "seconds": evaluations[-1][2] if solved else round(time.time() - start, 1),
    "env_steps": evaluations[-1][0] if solved else int(model.num_timesteps),
    "evaluations": evaluations, "evaluating_s": round(callback.evaluating_s, 1),
    "eval_envs": eval_envs, "torch_threads": torch.get_num_threads(),
    "cpu_s": round(times.user + times.system + times.children_user + times.children_system, 1),
}))
