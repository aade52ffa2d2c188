#include "core/config_schema.h"

namespace pronghorn::config_schema {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

std::vector<Field> fields(Config& c) {
  return {
      {"env", "name", &c.env.name, 0, 0, {}, "built-in env (see `pronghorn envs`)"},
      {"env", "plugin", &c.env.plugin, 0, 0, {}, "path of a user env library (.so); overrides env.name"},
      {"env", "num_envs", &c.env.num_envs, 1, 1 << 20, {}, "K: envs each actor steps as one batch"},
      {"env", "max_episode_steps", &c.env.max_episode_steps, 0, 1e9, {}, "time limit in steps; 0 keeps the env's own"},

      {"actor", "count", &c.actor.count, 0, kMaxActors, {}, "actor processes on this node: \"auto\" = one per spare core; 0 = none (remote actors only)"},
      {"actor", "unroll_length", &c.actor.unroll_length, 1, 4096, {}, "T: env steps per unroll"},
      {"actor", "threads", &c.actor.threads, 1, 256, {}, "LibTorch intra-op threads per actor"},
      {"actor", "oversubscribe", &c.actor.oversubscribe, 0, 0, {}, "allow more actors than 2 per core or than memory holds"},
      {"actor", "max_crashes", &c.actor.max_crashes, 0, 1e6, {}, "end the job after this many actor crashes in a row with no unroll; 0 = never"},
      {"actor", "stall_timeout_s", &c.actor.stall_timeout_s, 0, 1e9, {}, "end the job when no unroll comes for this long while actors are wanted; 0 = never"},

      {"learner", "batch_size", &c.learner.batch_size, 1, 4096, {}, "B: unrolls per learner step"},
      {"learner", "ring_slots", &c.learner.ring_slots, 2, 65536, {}, "unroll slots in the shared-memory ring"},
      {"learner", "max_policy_lag", &c.learner.max_policy_lag, 0, 1e9, {}, "unrolls older than this many policy versions are dropped"},
      {"learner", "optimizer", choice(&c.learner.optimizer), 0, 0, choices(c.learner.optimizer), "optimizer"},
      {"learner", "learning_rate", &c.learner.learning_rate, 1e-12, 10, {}, "initial learning rate"},
      {"learner", "lr_schedule", choice(&c.learner.lr_schedule), 0, 0, choices(c.learner.lr_schedule), "linear: decays to 0 at run.total_steps"},
      {"learner", "adam_eps", &c.learner.adam_eps, 1e-16, 1, {}, "Adam epsilon"},
      {"learner", "rmsprop_alpha", &c.learner.rmsprop_alpha, 0, 1, {}, "RMSProp smoothing constant"},
      {"learner", "max_grad_norm", &c.learner.max_grad_norm, 0, kInf, {}, "gradient-norm clip; 0 = off"},
      {"learner", "device", choice(&c.learner.device), 0, 0, choices(c.learner.device), "auto: CUDA when present, else CPU"},
      {"learner", "threads", &c.learner.threads, 0, 256, {}, "LibTorch intra-op threads; 0 = cores left after actors"},

      {"loss", "kind", choice(&c.loss.kind), 0, 0, choices(c.loss.kind), "impala: V-trace actor-critic; ppo: clipped objective"},
      {"loss", "advantages", choice(&c.loss.advantages), 0, 0, choices(c.loss.advantages), "advantages for ppo"},
      {"loss", "discount", &c.loss.discount, 0, 1, {}, "γ"},
      {"loss", "reward_scale", &c.loss.reward_scale, 1e-9, 1e9, {}, "rewards are multiplied by this for learning; episode returns are reported unscaled"},
      {"loss", "rho_bar", &c.loss.rho_bar, 0, kInf, {}, "V-trace ρ̄ (value targets)"},
      {"loss", "c_bar", &c.loss.c_bar, 0, kInf, {}, "V-trace c̄ (trace cutting)"},
      {"loss", "rho_pg_bar", &c.loss.rho_pg_bar, 0, kInf, {}, "ρ̄ of the policy-gradient advantage"},
      {"loss", "gae_lambda", &c.loss.gae_lambda, 0, 1, {}, "GAE λ"},
      {"loss", "ppo_clip", &c.loss.ppo_clip, 0, 1, {}, "PPO ratio clip ε"},
      {"loss", "baseline_cost", &c.loss.baseline_cost, 0, 1e6, {}, "weight of the value loss"},
      {"loss", "entropy_cost", &c.loss.entropy_cost, 0, 1e6, {}, "weight of the entropy bonus"},
      {"loss", "reduction", choice(&c.loss.reduction), 0, 0, choices(c.loss.reduction), "how loss terms reduce over T·B samples"},

      {"model", "kind", choice(&c.model.kind), 0, 0, choices(c.model.kind), "auto: MLP for vectors, IMPALA CNN for images"},
      {"model", "hidden", &c.model.hidden, 1, 65536, {}, "MLP hidden layer widths, e.g. [64, 64]"},
      {"model", "activation", choice(&c.model.activation), 0, 0, choices(c.model.activation), "MLP activation"},

      {"run", "name", &c.run.name, 0, 0, {}, "run name; empty = generated from the start time"},
      {"run", "dir", &c.run.dir, 0, 0, {}, "runs live in <dir>/<name>/"},
      {"run", "seed", &c.run.seed, 0, 9.007199254740992e15, {}, "seed of envs, sampling and initial weights"},
      {"run", "total_steps", &c.run.total_steps, 1, 9e18, {}, "env steps after which the run stops"},
      {"run", "target_return", &c.run.target_return, -kInf, kInf, {}, "stop once the mean return of 100 episodes reaches it; 0 = off"},
      {"run", "checkpoint_interval_s", &c.run.checkpoint_interval_s, 0, 1e9, {}, "seconds between checkpoints; 0 = only at stop"},
      {"run", "keep_checkpoints", &c.run.keep_checkpoints, 1, 1000, {}, "newest checkpoints kept"},
      {"run", "report_interval_s", &c.run.report_interval_s, 0.01, 3600, {}, "seconds between metrics lines"},

      {"server", "address", &c.server.address, 0, 0, {}, "gRPC control plane HOST:PORT; port 0 = any free port (the run dir's server.address names it)"},
      {"server", "token_file", &c.server.token_file, 0, 0, {}, "bearer token for mutating calls; empty = generated in the run dir"},
      {"server", "tls_cert", &c.server.tls_cert, 0, 0, {}, "PEM server certificate; empty = no TLS"},
      {"server", "tls_key", &c.server.tls_key, 0, 0, {}, "PEM private key of tls_cert"},
      {"server", "tls_client_ca", &c.server.tls_client_ca, 0, 0, {}, "PEM CA; set = clients need a certificate it signed"},
      {"server", "metrics_port", &c.server.metrics_port, -1, 65535, {}, "Prometheus /metrics port on 127.0.0.1; 0 = any free port, -1 = off"},
  };
}

std::string_view type_name(const Target& target) {
  struct Visitor {
    std::string_view operator()(int64_t*) const { return "an integer"; }
    std::string_view operator()(double*) const { return "a number"; }
    std::string_view operator()(std::string*) const { return "a string"; }
    std::string_view operator()(std::vector<int64_t>*) const { return "a list of integers"; }
    std::string_view operator()(bool*) const { return "true or false"; }
    std::string_view operator()(std::optional<int64_t>*) const { return "\"auto\" or an integer"; }
    std::string_view operator()(ChoiceRef) const { return "a string"; }
  };
  return std::visit(Visitor{}, target);
}

}  // namespace pronghorn::config_schema
