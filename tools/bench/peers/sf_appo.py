"""Sample Factory APPO on CartPole-v1 with the flags of its own gym example
(the command line in sf_examples/train_gym_env.py's docstring), on the CPU,
with the env monitored in every rollout worker. Ends when solved
(episodes.py). Run in a scratch folder (train_dir goes there).

    python sf_appo.py SEED LIMIT_S
"""
import os
import re
import sys

import episodes

if __name__ == "__main__":  # workers are spawned: they import this file again
    seed, limit_s = int(sys.argv[1]), float(sys.argv[2])
    episodes.watch(limit_s)

    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.envs.env_utils import register_env
    from sample_factory.train import run_rl
    import sf_examples.train_gym_env as example

    line = re.search(r"python -m sf_examples\.train_gym_env (.*CartPole-v1)\n", example.__doc__)
    if line is None:
        sys.exit("sf_appo: no CartPole-v1 command line in sf_examples/train_gym_env.py")
    argv = line.group(1).split() + [f"--seed={seed}", "--device=cpu",
                                    f"--train_dir={os.getcwd()}", "--restart_behavior=overwrite"]
    register_env("CartPole-v1", episodes.make_env)
    parser, _ = parse_sf_args(argv=argv)
    run_rl(parse_full_cfg(parser, argv))
    episodes.ended()
