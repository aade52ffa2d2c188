// `pronghorn eval --checkpoint PATH --episodes N`: runs the checkpoint's
// policy (from its run's config.toml) for N episodes and prints return
// statistics. Sampled actions by default, the most likely with --greedy.
// Each env contributes only its first episode: taking whichever episodes of
// K parallel envs end first would favour the short ones.
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>

#include "core/error.h"
#include "envs/env.h"
#include "learner/checkpoint.h"
#include "model/policy.h"
#include "model/sampling.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

struct EvalArgs {
  std::string checkpoint;
  int64_t episodes = 100;
  bool greedy = false;
  uint64_t seed = 12345;
};

void run_eval(const EvalArgs& args) {
  namespace fs = std::filesystem;
  learner::Checkpoint ckpt = learner::load_checkpoint(args.checkpoint);
  const fs::path run_dir = fs::path(args.checkpoint).parent_path().parent_path();
  Config config = load_config((run_dir / "config.toml").string(), {});
  config.env.num_envs = std::min<int64_t>(args.episodes, 32);
  auto env = envs::make_env(config.env, args.seed);
  const EnvSpec& spec = env->spec();
  PolicyNet model(model_spec_for(spec, config.model));
  PRONGHORN_CHECK(static_cast<int64_t>(ckpt.parameters.size()) == model->parameter_count(),
                  "checkpoint ", args.checkpoint, ": ", ckpt.parameters.size(),
                  " parameters, the model of ", (run_dir / "config.toml").string(), " has ",
                  model->parameter_count());
  model->read_flat(ckpt.parameters.data());
  torch::manual_seed(args.seed);
  torch::InferenceMode inference;

  const int64_t k = env->num_envs();
  std::vector<uint8_t> obs(spec.obs_bytes() * k);
  std::vector<float> rewards(k), continuous_actions(k * spec.action_size);
  std::vector<uint8_t> terminated(k), truncated(k);
  std::vector<int32_t> discrete_actions(k);
  std::vector<double> running(k, 0.0), returns;
  std::vector<uint8_t> counted(k, 0);  // this env's first episode is already in `returns`
  int64_t counted_this_round = 0;
  env->reset(obs.data());
  while (static_cast<int64_t>(returns.size()) < args.episodes) {
    const PolicyOutput out = model->forward(observation_tensor(obs.data(), spec, k));
    const bool discrete = spec.action_kind == ActionKind::kDiscrete;
    sample_actions(out, spec, args.greedy,
                   {.discrete = discrete ? discrete_actions.data() : nullptr,
                    .clipped = discrete ? nullptr : continuous_actions.data()});
    const void* actions =
        discrete ? static_cast<const void*>(discrete_actions.data()) : continuous_actions.data();
    env->step(actions, {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
    for (int64_t i = 0; i < k; ++i) {
      running[i] += rewards[i];
      if ((terminated[i] || truncated[i]) && !counted[i]) {
        returns.push_back(running[i]);
        counted[i] = 1;
        ++counted_this_round;
      }
    }
    if (counted_this_round == k) {  // every env gave one episode: a fresh round of first episodes
      std::fill(counted.begin(), counted.end(), 0);
      std::fill(running.begin(), running.end(), 0.0);
      counted_this_round = 0;
      env->reset(obs.data());
    }
  }
  returns.resize(args.episodes);
  const double mean = std::accumulate(returns.begin(), returns.end(), 0.0) / returns.size();
  double var = 0;
  for (double r : returns) var += (r - mean) * (r - mean);
  std::cout << fmt::format(
      "eval {} ({} policy, env {}, {} episodes): return mean {:.2f}, std {:.2f}, min {:.2f}, "
      "max {:.2f}\n",
      args.checkpoint, args.greedy ? "greedy" : "sampled", spec.name, returns.size(), mean,
      std::sqrt(var / returns.size()), *std::min_element(returns.begin(), returns.end()),
      *std::max_element(returns.begin(), returns.end()));
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* command =
      app.add_subcommand("eval", "Return statistics of a checkpoint's policy over N episodes");
  command->add_option("--checkpoint", args->checkpoint, "a .ckpt file in a run's checkpoints/")
      ->required();
  command->add_option("--episodes", args->episodes, "episodes to run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  command->add_flag("--greedy", args->greedy, "take the most likely action instead of sampling");
  command->add_option("--seed", args->seed, "seed of the envs and the sampling")
      ->capture_default_str();
  return {command, [args] { run_eval(*args); }};
}

}  // namespace pronghorn::cli
