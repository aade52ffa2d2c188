"""Sample Factory 2.1 APPO on ALE/Pong-v5 for issue 36's side-by-side
(tools/bench-atari): the env registered through Sample Factory's custom-env
API with the options of configs/atari.toml (Machado et al. 2018: sticky
actions 0.25, frame skip 4 with the last two frames max-pooled, a cap of
108 000 frames, no life-loss ends, up to 30 no-op starts, 84x84 grayscale,
4 frames stacked, the minimal action set), done by gymnasium 0.29's own
AtariPreprocessing and FrameStack wrappers. The learning settings match
Pronghorn's preset where the comparison needs it: the Nature CNN with a
512-unit layer and no RNN, unrolls of 20, batches of 1280 samples trained
once, Adam at 3e-4, rewards clipped to +-1 by the learner, inputs scaled by
1/255 and not normalised; everything else is Sample Factory's default (APPO,
asynchronous, PPO-clipped loss on GAE:
its V-trace path (--with_vtrace) ends its learner in 2.1.1 with
AttributeError "advantages" while recording summaries). Learner-consumed agent steps are counted without
frame skip (--summaries_use_frameskip=False). Run in a scratch folder
(train_dir goes there).

    python sf_atari.py WORKERS ENVS_PER_WORKER SECONDS [SEED]

Prints "# parameters: N" (the actor-critic's), then Sample Factory's log.
"""
import os
import sys

import gymnasium as gym

ENV = "pong_machado"
UNROLL = 20
BATCH = 1280


def make_pong(full_env_name, cfg=None, env_config=None, render_mode=None):
    """Sample Factory's env factory signature; module level so its worker
    processes can unpickle it."""
    import ale_py  # noqa: F401  (its entry point registers ALE/ ids with gymnasium 0.29)
    from sample_factory.envs.env_wrappers import NumpyObsWrapper

    env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.25,
                   max_num_frames_per_episode=108000, full_action_space=False,
                   render_mode=render_mode)
    env = gym.wrappers.RecordEpisodeStatistics(env)  # unclipped returns, as its Atari example
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                          terminal_on_life_loss=False, grayscale_obs=True,
                                          scale_obs=False)
    env = gym.wrappers.FrameStack(env, 4)
    return NumpyObsWrapper(env)


def parameters(cfg):
    from sample_factory.algo.utils.make_env import make_env_func_batched
    from sample_factory.model.actor_critic import create_actor_critic
    from sample_factory.utils.attr_dict import AttrDict

    env = make_env_func_batched(cfg, env_config=AttrDict(worker_index=0, vector_index=0, env_id=0))
    model = create_actor_critic(cfg, env.observation_space, env.action_space)
    env.close()
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":  # workers are spawned: they import this file again
    workers, envs, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0

    from sample_factory.cfg.arguments import parse_full_cfg, parse_sf_args
    from sample_factory.envs.env_utils import register_env
    from sample_factory.train import run_rl

    argv = [f"--env={ENV}", "--experiment=sf_atari", f"--train_dir={os.getcwd()}",
            "--restart_behavior=overwrite", "--device=cpu", f"--seed={seed}",
            f"--num_workers={workers}", f"--num_envs_per_worker={envs}",
            f"--rollout={UNROLL}", f"--recurrence={UNROLL}", f"--batch_size={BATCH}",
            "--num_batches_per_epoch=1", "--num_epochs=1", "--use_rnn=False",
            "--encoder_conv_architecture=convnet_atari", "--encoder_conv_mlp_layers", "512",
            "--nonlinearity=relu", "--obs_scale=255.0", "--normalize_input=False",
            "--normalize_returns=False", "--gamma=0.99",
            "--reward_clip=1.0", "--exploration_loss_coeff=0.01", "--learning_rate=0.0003",
            "--lr_schedule=constant", "--use_record_episode_statistics=True",
            "--summaries_use_frameskip=False", f"--train_for_seconds={seconds}"]
    register_env(ENV, make_pong)
    parser, _ = parse_sf_args(argv=argv)
    cfg = parse_full_cfg(parser, argv)
    print(f"# parameters: {parameters(cfg)}", flush=True)
    sys.exit(run_rl(cfg))
