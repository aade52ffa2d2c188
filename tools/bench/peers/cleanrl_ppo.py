"""CleanRL's single-file PPO (cleanrl/ppo.py, its defaults: CartPole-v1) run
as it is, with every env it makes monitored: gymnasium.make is wrapped before
the script runs. Ends when solved (episodes.py). Run in a scratch folder
(the script writes runs/ for TensorBoard).

    python cleanrl_ppo.py SEED LIMIT_S PPO_PY
"""
import runpy
import sys

import episodes

seed, limit_s, script = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
episodes.watch(limit_s)

import gymnasium  # noqa: E402

make = gymnasium.make
gymnasium.make = lambda *args, **kwargs: episodes.Monitor(make(*args, **kwargs))
sys.argv = [script, "--seed", str(seed), "--no-cuda"]
runpy.run_path(script, run_name="__main__")
episodes.ended()
