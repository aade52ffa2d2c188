// The one validated configuration of a Pronghorn job (docs/architecture.md §5).
//
// Sources, later wins: embedded defaults (configs/cartpole.toml's values, in
// the member initialisers below) → one TOML file → `--set section.key=value`
// overrides. load_config() validates everything before any work starts: an
// unknown section or key, a wrong type, an out-of-range value or an
// inconsistent combination throws pronghorn::UsageError with one line naming
// the key, the value given and what was expected.
//
// Every key, its range and its one-line help live in config_schema.cpp; this
// header only holds the values.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/option_table.h"

namespace pronghorn {

struct EnvConfig {
  // A built-in env (`pronghorn envs` lists them), "gymnasium:<id>" or
  // "python:<module>:<callable>" (envs/python_env.h).
  std::string name = "cartpole";
  std::string plugin;              // path of a user env library; overrides `name`
  int64_t num_envs = 32;           // K: envs stepped as one batch by each actor
  int64_t max_episode_steps = 0;   // time limit; 0 keeps the env's own
  std::string python = "python3";  // the interpreter of a Python env (its venv's packages)
  OptionTable options;             // a Python env's keyword arguments
  int64_t workers = 1;             // a Python env's worker processes per actor
  // Groups of a Python env's envs that step apart, in turn: the actor acts
  // for one while the workers step another (envs/env.h, splits()).
  int64_t splits = 1;
  // Keys of a Python env's info read at each episode's end (numbers; "a/b"
  // reads info["a"]["b"]), reported beside the return (envs/python_env.h).
  std::vector<std::string> episode_info;
};

// The most actors one node may be asked to run (actor.count, ScaleActors).
inline constexpr int kMaxActors = 1024;

struct ActorConfig {
  // Actor processes on this node: empty is "auto", one per spare core; 0 is
  // none (a learner fed only by remote actor nodes; it waits, not stalled).
  std::optional<int64_t> count;
  int64_t unroll_length = 16;  // T: env steps per unroll
  int64_t threads = 1;         // LibTorch intra-op threads per actor
  bool oversubscribe = false;  // allow more actors than this node's cores and memory hold
  // The actor processes' (and their env workers') nice value, 0..19: empty
  // is "auto", 10 with several learner ranks, else 0 (fleet/priority.h).
  std::optional<int64_t> nice;
  // The job ends (exit 1) after this many actor crashes in a row with no
  // unroll committed in between, or when no unroll comes for this long while
  // actors are wanted. 0 = never.
  int64_t max_crashes = 5;
  double stall_timeout_s = 60;
  // Also when, over the last crash_window_s, actors crash more than this
  // often per committed unroll (at least 5 crashes; fleet/actor_watchdog.h).
  // 0 = never.
  double max_crash_rate = 0.2;
  double crash_window_s = 60;
};

struct LearnerConfig {
  enum class Optimizer { kAdam, kRmsprop };
  enum class LrSchedule { kLinear, kConstant };
  enum class Device { kAuto, kCpu, kCuda };
  enum class Shuffle { kColumns, kSteps };

  int64_t batch_size = 2;       // B: unrolls per learner step
  int64_t ring_slots = 16;      // unroll slots in the shared-memory ring
  int64_t max_policy_lag = 16;  // unrolls older than this many versions are dropped
  Optimizer optimizer = Optimizer::kAdam;
  double learning_rate = 1e-3;
  LrSchedule lr_schedule = LrSchedule::kLinear;  // decays to 0 at run.total_steps, or constant
  double adam_eps = 1e-8;
  double rmsprop_alpha = 0.99;
  double max_grad_norm = 40.0;
  Device device = Device::kAuto;  // auto: CUDA when present, else CPU
  int64_t threads = 0;            // LibTorch intra-op threads; 0 = cores left after actors
  // Samples used more than once: each batch is trained on for `epochs`
  // passes, each pass split into `minibatches` optimizer steps over a fresh
  // random permutation of the batch's B·K columns (env trajectories; T+1
  // rows and an LSTM's state stay together), seeded from run.seed.
  // minibatches must divide B·K. The policy version advances once per batch
  // (weights published after the last pass), so max_policy_lag counts
  // publications; learner_steps counts batches, optimizer_steps steps.
  // PPO on GAE computes advantages and returns once per batch before the
  // first pass; V-trace (IMPALA, PPO on vtrace) recomputes them per
  // minibatch from the current model, against the actors' log-probs.
  int64_t epochs = 1;
  int64_t minibatches = 1;
  // What each pass's permutation shuffles: env columns (whole trajectories,
  // which V-trace and an LSTM need), or single steps, as Stable-Baselines3 and
  // CleanRL's PPO draw their minibatches (PPO on GAE, feed-forward models:
  // then minibatches must divide the batch's T·B·K steps).
  Shuffle shuffle = Shuffle::kColumns;
  // Each batch acted by the very policy that then trains on it (lag 0, PPO
  // as published), not by the one before (lag 1, while the learner trains on
  // the last batch): actors wait while the learner trains. With
  // run.deterministic, whose fixed actor order it uses.
  bool on_policy = false;
};

struct LossConfig {
  enum class Kind { kImpala, kPpo };
  enum class Advantages { kVtrace, kGae };
  enum class Reduction { kMean, kSum };
  enum class AdvantageStats { kMinibatch, kBatch };

  Kind kind = Kind::kImpala;                    // impala (V-trace actor-critic) or ppo
  Advantages advantages = Advantages::kVtrace;  // PPO only: vtrace or gae
  double discount = 0.99;
  // The learner trains on rewards × this (returns are reported unscaled).
  // CartPole's +1 a step gives values near 100 unscaled: 0.1 keeps the
  // value loss from swamping the shared torso (BENCHMARKS.md).
  double reward_scale = 0.1;
  // > 0: rewards clipped to ±this before reward_scale, for learning only (the
  // IMPALA and DQN papers' Atari clipping to ±1); 0: off.
  double reward_clip = 0.0;
  double rho_bar = 1.0;     // V-trace ρ̄: clips importance weights in the value targets
  double c_bar = 1.0;       // V-trace c̄: clips the trace-cutting coefficients
  double rho_pg_bar = 1.0;  // clips importance weights in the policy-gradient advantage
  double gae_lambda = 0.95;
  double ppo_clip = 0.2;
  // > 0: PPO's value clipping (CleanRL's clip_vloss): the value loss is the
  // larger of the plain one and that of the value clipped to within this of
  // the value the batch started with (kernels/loss_math.h). PPO only.
  double value_clip = 0.0;
  double baseline_cost = 0.5;
  double entropy_cost = 0.01;
  Reduction reduction = Reduction::kMean;  // over the T·B samples of a batch: mean or sum
  // Advantages to mean 0, std 1 before the policy loss, by advantage_stats:
  // each minibatch's own mean and std (a minibatch of env columns: a few
  // trajectories), or the whole batch's, from the advantages of a no-grad
  // forward before its first step (as Stable-Baselines3's minibatches of
  // steps drawn from the whole batch have them).
  bool normalize_advantages = false;
  AdvantageStats advantage_stats = AdvantageStats::kMinibatch;
  // Rewards (after reward_scale) divided by a running estimate of the
  // discounted return's standard deviation, clipped to ±10
  // (learner/return_scaling.h).
  bool return_scaling = false;
};

struct ModelConfig {
  enum class Kind { kAuto, kMlp, kImpalaCnn, kNatureCnn };
  enum class Activation { kTanh, kRelu };
  enum class Core { kNone, kLstm };
  enum class FastPath { kAuto, kOff };
  enum class Init { kDefault, kOrthogonal };

  // mlp, impala_cnn, nature_cnn (Mnih et al. 2015: the Atari DQN torso), or
  // auto: the MLP for vectors, the IMPALA CNN for images
  Kind kind = Kind::kAuto;
  std::vector<int64_t> hidden = {64, 64};     // MLP hidden layer widths
  Activation activation = Activation::kTanh;  // tanh or relu
  Core core = Core::kNone;                    // none (feed-forward) or lstm, after the torso
  int64_t core_hidden = 128;                  // the LSTM's state width (core = lstm)
  // auto: an MLP policy on the CPU acts (actors, evaluation) and trains
  // (forward, backward, Adam) through fused code (model/fast_mlp.h,
  // fast_mlp_train.h, fast_adam.h); off, and every other model: LibTorch.
  FastPath fast_path = FastPath::kAuto;
  // default: LibTorch's layer initialisation, the policy head's weights
  // scaled by 0.01; orthogonal: every weight matrix orthogonal with gain √2
  // (torso), 0.01 (policy head), 1 (value head and LSTM), biases 0 — the
  // initialisation of the PPO implementations that reach the published
  // MuJoCo and Atari returns (CleanRL, Stable-Baselines3).
  Init init = Init::kDefault;
  double log_std_init = 0.0;  // the Gaussian head's initial log-std, every dimension
  // The value head on an MLP torso of its own (model.hidden, activation), not
  // on the policy's: separate actor and critic, as CleanRL's and
  // Stable-Baselines3's continuous-control PPO. MLP policies without a core.
  bool separate_value = false;
  // The value torso's widths (model.separate_value); empty: model.hidden's.
  // Andrychowicz et al. (2021) recommend one wider than the policy's (not
  // better on HalfCheetah's preset here: BENCHMARKS.md).
  std::vector<int64_t> value_hidden;
  // Float observations normalised by a running mean and variance before the
  // network, then clipped to ±observation_clip (model/observation_norm.h):
  // the learner updates the statistics from each batch and publishes them
  // with the weights; evaluation and export use them frozen.
  bool normalize_observations = false;
  double observation_clip = 10.0;
};

// The spelling of each choice in TOML, in enum order: the one list of them.
// config_schema.cpp's table takes its choices from here, and to_string() too.
template <size_t N>
using ChoiceNames = std::array<std::string_view, N>;
constexpr ChoiceNames<2> names_of(LearnerConfig::Optimizer) { return {"adam", "rmsprop"}; }
constexpr ChoiceNames<2> names_of(LearnerConfig::LrSchedule) { return {"linear", "constant"}; }
constexpr ChoiceNames<3> names_of(LearnerConfig::Device) { return {"auto", "cpu", "cuda"}; }
constexpr ChoiceNames<2> names_of(LearnerConfig::Shuffle) { return {"columns", "steps"}; }
constexpr ChoiceNames<2> names_of(LossConfig::Kind) { return {"impala", "ppo"}; }
constexpr ChoiceNames<2> names_of(LossConfig::Advantages) { return {"vtrace", "gae"}; }
constexpr ChoiceNames<2> names_of(LossConfig::Reduction) { return {"mean", "sum"}; }
constexpr ChoiceNames<2> names_of(LossConfig::AdvantageStats) { return {"minibatch", "batch"}; }
constexpr ChoiceNames<4> names_of(ModelConfig::Kind) {
  return {"auto", "mlp", "impala_cnn", "nature_cnn"};
}
constexpr ChoiceNames<2> names_of(ModelConfig::Activation) { return {"tanh", "relu"}; }
constexpr ChoiceNames<2> names_of(ModelConfig::Core) { return {"none", "lstm"}; }
constexpr ChoiceNames<2> names_of(ModelConfig::FastPath) { return {"auto", "off"}; }
constexpr ChoiceNames<2> names_of(ModelConfig::Init) { return {"default", "orthogonal"}; }

// A choice as its config word ("rmsprop"), for messages; "?" for a value
// outside the enum (validate() refuses those).
template <typename E>
requires requires(E e) { names_of(e); }
constexpr std::string_view to_string(E choice) {
  const auto names = names_of(choice);
  const auto i = static_cast<size_t>(choice);
  return i < names.size() ? names[i] : std::string_view("?");
}

struct RunConfig {
  std::string name;          // empty: generated from the start time
  std::string dir = "runs";  // runs live in <dir>/<name>/
  int64_t seed = 1;
  int64_t total_steps = 20'000'000;  // env steps; the run stops there
  // Stop, solved, when an evaluation's mean return reaches it (the mean of
  // the last 100 training episodes reaching it starts that evaluation at
  // once). Empty ("auto"): the env's own (EnvSpec::target_return); 0 = off.
  std::optional<double> target_return;
  double checkpoint_interval_s = 60;
  int64_t keep_checkpoints = 3;
  double report_interval_s = 1.0;
  // Evaluation of the greedy policy on envs of its own, in a thread of its
  // own (learner/evaluator.h): every eval_interval_s (0 = only for the
  // target), over eval_episodes episodes.
  double eval_interval_s = 30;
  int64_t eval_episodes = 10;
  // Cadences in env steps instead (0: by the clock above): a checkpoint, or
  // an evaluation, once the env steps reach each multiple.
  int64_t checkpoint_interval_steps = 0;
  int64_t eval_interval_steps = 0;
  // The same config and seed give the same learner steps, losses and
  // checkpoints, byte for byte, on the same machine type
  // (docs/training.md#reproducibility): each batch takes learner.batch_size
  // / actors unrolls from every actor in order, each acted with the policy
  // one version behind the learner's; evaluations hold training until they
  // report;
  // checkpoints and evaluations come only at the step cadences above.
  bool deterministic = false;
};

struct ServerConfig {
  std::string address = "127.0.0.1:7453";  // gRPC control plane; port 0 = any free port
  std::string token_file;                  // empty: generated into the run directory
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;                  // set: clients must present a certificate it signed
  int64_t metrics_port = 7454;                // Prometheus /metrics; 0 = any free port, -1 = off
  std::string metrics_address = "127.0.0.1";  // its IPv4 listen address; 0.0.0.0 = every interface
};

// Several learners training one model (data-parallel). Where this learner
// stands in the group, when not set here, comes from the environment a
// launcher leaves (torchrun, Slurm, a Kubernetes Indexed Job):
// distributed/placement.h resolves it.
struct DistributedConfig {
  enum class Backend { kAuto, kGloo, kNccl };

  // Learners in the job: empty is "auto", from the environment, else 1
  // (today's single learner).
  std::optional<int64_t> world_size;
  // This learner's place in [0, world_size): empty is "auto", from the environment.
  std::optional<int64_t> rank;
  // HOST:PORT of rank 0's store ([::1]:PORT for IPv6); empty = from the
  // environment. Port 0 only on rank 0: it picks a free port.
  std::string rendezvous;
  Backend backend = Backend::kAuto;    // auto: NCCL when the learner is on CUDA, Gloo otherwise
  std::string interface;               // for collectives; empty = the one that routes to rank 0
  double timeout_s = 60;               // deadline of every collective call
  double rendezvous_timeout_s = 300;   // how long ranks wait for each other at start
  int64_t check_interval_steps = 100;  // learner steps between parameter checksums; 0 = never
  int64_t batch_wait_ms = 50;  // a rank with no batch by then enters the step with 0 samples
};

constexpr ChoiceNames<3> names_of(DistributedConfig::Backend) { return {"auto", "gloo", "nccl"}; }

// Actor-only nodes (`pronghorn actor --learner HOST:PORT`, proto/remote.proto)
// that stream unrolls to this learner. TLS and the token are the control
// plane's (server.tls_*, the job's token).
struct RemoteConfig {
  std::string address;  // HOST:PORT to serve them on; empty = none; port 0 = any free port
  int64_t credits = 4;  // unrolls one node may have in flight: ring slots held for it
};

struct Config {
  EnvConfig env;
  ActorConfig actor;
  LearnerConfig learner;
  LossConfig loss;
  ModelConfig model;
  RunConfig run;
  ServerConfig server;
  DistributedConfig distributed;
  RemoteConfig remote;
};

// Defaults, then `toml_path` (skipped when empty), then `overrides`, each
// "section.key=value" with the value written as in TOML (strings may drop
// their quotes). Throws UsageError on the first problem.
Config load_config(const std::string& toml_path, const std::vector<std::string>& overrides);

// Same, from TOML text instead of a file (`origin` names it in errors).
Config parse_config(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides);

// Throws UsageError unless every value is in range and the combination holds.
void validate(const Config& config);

// Whether `env` is hosted in Python env workers (envs/python_env.h): no
// env.plugin, and env.name "gymnasium:…", "envpool:…" or "python:…".
bool is_python_env(const EnvConfig& env);

// Whether HOST:PORT names this machine only (127.0.0.0/8, ::1, localhost).
bool is_loopback_address(const std::string& host_port);

// HOST:PORT in its parts. An IPv6 host is written in brackets ([::1]:29500)
// and comes back without them ("::1").
struct HostPort {
  std::string host;
  int port = 0;
};

// `text` split as HOST:PORT, or nullopt unless the host is non-empty (no
// spaces; brackets around one with colons) and the port is a number in
// [0, 65535].
std::optional<HostPort> parse_host_port(std::string_view text);

// The resolved config as TOML that load_config() reads back to an equal Config.
std::string to_toml(const Config& config);

}  // namespace pronghorn
