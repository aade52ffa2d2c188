#include "core/config_schema.h"

namespace pronghorn::config_schema {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Ranks kSame = Ranks::kSame;
constexpr Ranks kPerRank = Ranks::kMayDiffer;
}  // namespace

std::vector<Field> fields(Config& c) {
  // One row per key: section, key, where its value goes (its kind), min and
  // max (numbers and list items; 0, 0 where unused), choices, whether the
  // ranks of one job may set it differently, help. A table to scan, one line
  // per key: clang-format keeps out.
  // clang-format off
  return {
    {"env",         "name",                  &c.env.name,                         0,     0,                    {},                             kSame,    "built-in env (see `pronghorn envs`), \"gymnasium:<id>\" or \"python:<module>:<callable>\""},
    {"env",         "plugin",                &c.env.plugin,                       0,     0,                    {},                             kSame,    "path of a user env library (.so); overrides env.name"},
    {"env",         "num_envs",              &c.env.num_envs,                     1,     1 << 20,              {},                             kSame,    "K: envs each actor steps as one batch"},
    {"env",         "max_episode_steps",     &c.env.max_episode_steps,            0,     1e9,                  {},                             kSame,    "time limit in steps; 0 keeps the env's own"},
    {"env",         "python",                &c.env.python,                       0,     0,                    {},                             kPerRank, "interpreter of a Python env (a venv's python brings its packages)"},
    {"env",         "options",               &c.env.options,                      0,     0,                    {},                             kSame,    "a Python env's keyword arguments: [env.options] or --set env.options.NAME=VALUE"},
    {"env",         "workers",               &c.env.workers,                      1,     256,                  {},                             kPerRank, "a Python env's worker processes per actor, each stepping its share of env.num_envs at once"},
    {"env",         "splits",                &c.env.splits,                       1,     64,                   {},                             kPerRank, "a Python env's envs in groups that step in turn, each while the actor acts for another (double buffering); 2 pays where the actor has a core of its own"},
    {"env",         "episode_info",          &c.env.episode_info,                 0,     16,                   {},                             kSame,    "keys of a Python env's info read at each episode's end (numbers; \"a/b\" is info[\"a\"][\"b\"]), logged beside the return"},

    {"actor",       "count",                 &c.actor.count,                      0,     kMaxActors,           {},                             kPerRank, "actor processes on this node: \"auto\" = one per spare core; 0 = none (remote actors only)"},
    {"actor",       "unroll_length",         &c.actor.unroll_length,              1,     4096,                 {},                             kSame,    "T: env steps per unroll"},
    {"actor",       "threads",               &c.actor.threads,                    1,     256,                  {},                             kSame,    "LibTorch intra-op threads per actor"},
    {"actor",       "oversubscribe",         &c.actor.oversubscribe,              0,     0,                    {},                             kSame,    "allow more actors than 2 per core or than memory holds"},
    {"actor",       "nice",                  &c.actor.nice,                       0,     19,                   {},                             kPerRank, "actor processes' nice value: \"auto\" = 10 with several learner ranks (their learners' steps wait on each other: see docs/several-learners.md), else 0"},
    {"actor",       "max_crashes",           &c.actor.max_crashes,                0,     1e6,                  {},                             kSame,    "end the job after this many actor crashes in a row with no unroll; 0 = never"},
    {"actor",       "stall_timeout_s",       &c.actor.stall_timeout_s,            0,     1e9,                  {},                             kSame,    "end the job when no unroll comes for this long while actors are wanted; 0 = never"},
    {"actor",       "max_crash_rate",        &c.actor.max_crash_rate,             0,     1e6,                  {},                             kSame,    "end the job when actors crash more than this often per committed unroll over crash_window_s (at least 5 crashes); 0 = never"},
    {"actor",       "crash_window_s",        &c.actor.crash_window_s,             1,     1e6,                  {},                             kSame,    "the window over which actor.max_crash_rate is judged"},

    {"learner",     "batch_size",            &c.learner.batch_size,               1,     4096,                 {},                             kSame,    "B: unrolls per learner step"},
    {"learner",     "ring_slots",            &c.learner.ring_slots,               2,     65536,                {},                             kSame,    "unroll slots in the shared-memory ring"},
    {"learner",     "max_policy_lag",        &c.learner.max_policy_lag,           0,     1e9,                  {},                             kSame,    "unrolls older than this many policy versions are dropped"},
    {"learner",     "optimizer",             choice(&c.learner.optimizer),        0,     0,                    choices(c.learner.optimizer),   kSame,    "optimizer"},
    {"learner",     "learning_rate",         &c.learner.learning_rate,            1e-12, 10,                   {},                             kSame,    "initial learning rate"},
    {"learner",     "lr_schedule",           choice(&c.learner.lr_schedule),      0,     0,                    choices(c.learner.lr_schedule), kSame,    "linear: decays to 0 at run.total_steps"},
    {"learner",     "adam_eps",              &c.learner.adam_eps,                 1e-16, 1,                    {},                             kSame,    "Adam epsilon"},
    {"learner",     "rmsprop_alpha",         &c.learner.rmsprop_alpha,            0,     1,                    {},                             kSame,    "RMSProp smoothing constant"},
    {"learner",     "max_grad_norm",         &c.learner.max_grad_norm,            0,     kInf,                 {},                             kSame,    "gradient-norm clip; 0 = off"},
    {"learner",     "device",                choice(&c.learner.device),           0,     0,                    choices(c.learner.device),      kSame,    "auto: CUDA when present, else CPU"},
    {"learner",     "threads",               &c.learner.threads,                  0,     256,                  {},                             kPerRank, "LibTorch and OpenBLAS threads; 0 = the cores this node's actors leave (at least 1)"},
    {"learner",     "epochs",                &c.learner.epochs,                   1,     1000,                 {},                             kSame,    "passes over each batch"},
    {"learner",     "minibatches",           &c.learner.minibatches,              1,     1 << 20,              {},                             kSame,    "optimizer steps per pass, each on 1 / minibatches of the batch's columns (or steps)"},
    {"learner",     "on_policy",             &c.learner.on_policy,                0,     0,                    {},                             kSame,    "each batch acted by the policy that trains on it (lag 0, PPO as published; actors wait while the learner trains); needs run.deterministic"},
    {"learner",     "shuffle",               choice(&c.learner.shuffle),          0,     0,                    choices(c.learner.shuffle),     kSame,    "what a pass's minibatches are drawn from: env columns (whole trajectories) or single steps (PPO on GAE, feed-forward models)"},

    {"loss",        "kind",                  choice(&c.loss.kind),                0,     0,                    choices(c.loss.kind),           kSame,    "impala: V-trace actor-critic; ppo: clipped objective"},
    {"loss",        "advantages",            choice(&c.loss.advantages),          0,     0,                    choices(c.loss.advantages),     kSame,    "advantages for ppo"},
    {"loss",        "discount",              &c.loss.discount,                    0,     1,                    {},                             kSame,    "γ"},
    {"loss",        "reward_scale",          &c.loss.reward_scale,                1e-9,  1e9,                  {},                             kSame,    "rewards are multiplied by this for learning; episode returns are reported unscaled"},
    {"loss",        "reward_clip",           &c.loss.reward_clip,                 0,     1e9,                  {},                             kSame,    "0: off; else rewards clipped to ±this before reward_scale, for learning (Atari's ±1); returns are reported unclipped"},
    {"loss",        "rho_bar",               &c.loss.rho_bar,                     0,     kInf,                 {},                             kSame,    "V-trace ρ̄ (value targets)"},
    {"loss",        "c_bar",                 &c.loss.c_bar,                       0,     kInf,                 {},                             kSame,    "V-trace c̄ (trace cutting)"},
    {"loss",        "rho_pg_bar",            &c.loss.rho_pg_bar,                  0,     kInf,                 {},                             kSame,    "ρ̄ of the policy-gradient advantage"},
    {"loss",        "gae_lambda",            &c.loss.gae_lambda,                  0,     1,                    {},                             kSame,    "GAE λ"},
    {"loss",        "ppo_clip",              &c.loss.ppo_clip,                    0,     1,                    {},                             kSame,    "PPO ratio clip ε"},
    {"loss",        "value_clip",            &c.loss.value_clip,                  0,     1e6,                  {},                             kSame,    "0: off; else PPO's value clipping: the larger of the plain value loss and that of the value kept within this of the batch's starting value (PPO)"},
    {"loss",        "baseline_cost",         &c.loss.baseline_cost,               0,     1e6,                  {},                             kSame,    "weight of the value loss"},
    {"loss",        "entropy_cost",          &c.loss.entropy_cost,                0,     1e6,                  {},                             kSame,    "weight of the entropy bonus"},
    {"loss",        "reduction",             choice(&c.loss.reduction),           0,     0,                    choices(c.loss.reduction),      kSame,    "how loss terms reduce over T·B samples"},
    {"loss",        "return_scaling",        &c.loss.return_scaling,              0,     0,                    {},                             kSame,    "divide rewards by a running estimate of the discounted return's standard deviation, clipped to ±10 (Stable-Baselines3's norm_reward)"},
    {"loss",        "normalize_advantages",  &c.loss.normalize_advantages,        0,     0,                    {},                             kSame,    "advantages to mean 0, std 1 before the policy loss (by loss.advantage_stats)"},
    {"loss",        "advantage_stats",       choice(&c.loss.advantage_stats),     0,     0,                    choices(c.loss.advantage_stats), kSame,   "the mean and std loss.normalize_advantages uses: each minibatch's own, or the whole batch's (its advantages before the first step)"},

    {"model",       "kind",                  choice(&c.model.kind),               0,     0,                    choices(c.model.kind),          kSame,    "auto: MLP for vectors, IMPALA CNN for images"},
    {"model",       "hidden",                &c.model.hidden,                     1,     65536,                {},                             kSame,    "MLP hidden layer widths, e.g. [64, 64]"},
    {"model",       "activation",            choice(&c.model.activation),         0,     0,                    choices(c.model.activation),    kSame,    "MLP activation"},
    {"model",       "core",                  choice(&c.model.core),               0,     0,                    choices(c.model.core),          kSame,    "recurrent core between the torso and the heads: none (feed-forward) or lstm"},
    {"model",       "core_hidden",           &c.model.core_hidden,                1,     4096,                 {},                             kSame,    "the LSTM's hidden and cell state width (model.core = \"lstm\")"},
    {"model",       "init",                  choice(&c.model.init),               0,     0,                    choices(c.model.init),          kSame,    "default: LibTorch's, the policy head × 0.01; orthogonal: gains √2 (torso), 0.01 (policy head), 1 (value head, LSTM), biases 0"},
    {"model",       "log_std_init",          &c.model.log_std_init,               -20,   2,                    {},                             kSame,    "a Gaussian policy's initial log standard deviation (state-independent, learned)"},
    {"model",       "value_hidden",          &c.model.value_hidden,               1,     65536,                {},                             kSame,    "the value torso's widths with model.separate_value, e.g. [256, 256]; empty: model.hidden's"},
    {"model",       "separate_value",        &c.model.separate_value,             0,     0,                    {},                             kSame,    "the value head on an MLP torso of its own (model.value_hidden's widths), not the policy's (CleanRL's and SB3's separate actor and critic); MLP policies without a core"},
    {"model",       "normalize_observations", &c.model.normalize_observations,    0,     0,                    {},                             kSame,    "normalise float observations by a running mean and variance (Stable-Baselines3's norm_obs), learned from the batches, published with the weights, frozen in evaluation and export"},
    {"model",       "observation_clip",      &c.model.observation_clip,           1e-3,  1e6,                  {},                             kSame,    "normalised observations clipped to ±this (model.normalize_observations)"},
    {"model",       "fast_path",             choice(&c.model.fast_path),          0,     0,                    choices(c.model.fast_path),     kSame,    "auto: MLP policies on the CPU act and train through fused code (model/fast_mlp.h); off: LibTorch"},

    {"run",         "name",                  &c.run.name,                         0,     0,                    {},                             kSame,    "run name; empty = generated from the start time"},
    {"run",         "dir",                   &c.run.dir,                          0,     0,                    {},                             kPerRank, "runs live in <dir>/<name>/"},
    {"run",         "seed",                  &c.run.seed,                         0,     9.007199254740992e15, {},                             kPerRank, "seed of envs, sampling and initial weights"},
    {"run",         "total_steps",           &c.run.total_steps,                  1,     9e18,                 {},                             kSame,    "env steps after which the run stops"},
    {"run",         "target_return",         &c.run.target_return,                -kInf, kInf,                 {},                             kSame,    "stop once an evaluation's mean return reaches it (checked when the training mean does); \"auto\" = the env's own target (a plugin's if it declares one); 0 = off"},
    {"run",         "checkpoint_interval_s", &c.run.checkpoint_interval_s,        0,     1e9,                  {},                             kSame,    "seconds between checkpoints; 0 = only at stop"},
    {"run",         "keep_checkpoints",      &c.run.keep_checkpoints,             1,     1000,                 {},                             kSame,    "newest checkpoints kept"},
    {"run",         "report_interval_s",     &c.run.report_interval_s,            0.01,  3600,                 {},                             kSame,    "seconds between metrics lines"},
    {"run",         "eval_interval_s",       &c.run.eval_interval_s,              0,     1e9,                  {},                             kSame,    "seconds between evaluations of the greedy policy on envs of their own; 0 = only for run.target_return"},
    {"run",         "eval_episodes",         &c.run.eval_episodes,                1,     100000,               {},                             kSame,    "episodes per evaluation"},
    {"run",         "checkpoint_interval_steps", &c.run.checkpoint_interval_steps, 0,    9e18,                 {},                             kSame,    "env steps between checkpoints; set, it replaces run.checkpoint_interval_s"},
    {"run",         "eval_interval_steps",   &c.run.eval_interval_steps,          0,     9e18,                 {},                             kSame,    "env steps between evaluations; set, it replaces run.eval_interval_s"},
    {"run",         "deterministic",         &c.run.deterministic,                0,     0,                    {},                             kSame,    "the same config and seed give the same run byte for byte (fixed actor order, lag 1, step cadences only)"},

    {"server",      "address",               &c.server.address,                   0,     0,                    {},                             kPerRank, "gRPC control plane HOST:PORT; port 0 = any free port (the run dir's server.address names it)"},
    {"server",      "token_file",            &c.server.token_file,                0,     0,                    {},                             kPerRank, "bearer token for mutating calls; empty = generated in the run dir"},
    {"server",      "tls_cert",              &c.server.tls_cert,                  0,     0,                    {},                             kPerRank, "PEM server certificate; empty = no TLS"},
    {"server",      "tls_key",               &c.server.tls_key,                   0,     0,                    {},                             kPerRank, "PEM private key of tls_cert"},
    {"server",      "tls_client_ca",         &c.server.tls_client_ca,             0,     0,                    {},                             kPerRank, "PEM CA; set = clients need a certificate it signed"},
    {"server",      "metrics_port",          &c.server.metrics_port,              -1,    65535,                {},                             kPerRank, "Prometheus /metrics port on server.metrics_address; 0 = any free port, -1 = off"},
    {"server",      "metrics_address",       &c.server.metrics_address,           0,     0,                    {},                             kPerRank, "IPv4 address /metrics listens on; 0.0.0.0 = every interface (anyone who can reach it reads the job's figures, no token)"},

    {"distributed", "world_size",            &c.distributed.world_size,           1,     4096,                 {},                             kPerRank, "learners training one model: \"auto\" = from the environment (torchrun, Slurm, an Indexed Job), else 1"},
    {"distributed", "rank",                  &c.distributed.rank,                 0,     4095,                 {},                             kPerRank, "this learner's rank: \"auto\" = from the environment"},
    {"distributed", "rendezvous",            &c.distributed.rendezvous,           0,     0,                    {},                             kPerRank, "HOST:PORT of rank 0's store; empty = from the environment; port 0 (rank 0 only) = any free port"},
    {"distributed", "backend",               choice(&c.distributed.backend),      0,     0,                    choices(c.distributed.backend), kPerRank, "auto: NCCL when the learner is on CUDA, Gloo otherwise"},
    {"distributed", "interface",             &c.distributed.interface,            0,     0,                    {},                             kPerRank, "network interface for collectives; empty = the one that routes to rank 0"},
    {"distributed", "timeout_s",             &c.distributed.timeout_s,            0.1,   86400,                {},                             kSame,    "deadline of each collective call; a lost peer ends the job (exit 75) within it"},
    {"distributed", "rendezvous_timeout_s",  &c.distributed.rendezvous_timeout_s, 0.1,   86400,                {},                             kSame,    "how long ranks wait for each other at start"},
    {"distributed", "check_interval_steps",  &c.distributed.check_interval_steps, 0,     1e9,                  {},                             kSame,    "learner steps between parameter checksum comparisons; 0 = never"},
    {"distributed", "batch_wait_ms",         &c.distributed.batch_wait_ms,        0,     60000,                {},                             kSame,    "a rank with no batch after this long enters the step with 0 samples (under run.deterministic: votes, and waits again)"},

    {"remote",      "address",               &c.remote.address,                   0,     0,                    {},                             kPerRank, "HOST:PORT where actor-only nodes (`pronghorn actor`) join; empty = none; port 0 = any free port (the run dir's remote.address names it)"},
    {"remote",      "credits",               &c.remote.credits,                   1,     1024,                 {},                             kPerRank, "unrolls one actor-only node may have in flight (ring slots held for it)"},
  };
  // clang-format on
}

bool may_differ_per_rank(std::string_view name) {
  Config c;
  for (const Field& f : fields(c)) {
    if (f.name() == name) return f.ranks == Ranks::kMayDiffer;
  }
  return false;
}

}  // namespace pronghorn::config_schema
