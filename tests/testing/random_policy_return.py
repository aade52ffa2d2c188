# A uniformly random policy's return on a Gymnasium env, for a learning test
# to beat: EPISODES whole episodes of gymnasium.make(ENV_ID), actions drawn
# from the action space seeded with SEED, the env reset with SEED + episode.
#
#   random_policy_return.py ENV_ID EPISODES SEED
#
# Prints "mean=M std=S" over the episodes' undiscounted returns.
import sys

import gymnasium
import numpy as np


def main():
    env_id, episodes, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    env = gymnasium.make(env_id)
    env.action_space.seed(seed)
    returns = []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    print(f"mean={np.mean(returns):.1f} std={np.std(returns):.1f}")


if __name__ == "__main__":
    main()
