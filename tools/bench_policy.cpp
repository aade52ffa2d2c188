// `pronghorn bench policy`: an actor's inference step (policy forward and
// sampling of K actions with their log-probs) with the fused MLP path
// (model.fast_path = auto) against LibTorch (off), both through the policy
// face (model/policy_face.h), in the same run, on the env's observations, one
// thread; median of many steps.
// Then the learner's model forward and backward both ways, at the row counts
// of configs/cartpole.toml's batch (17 · 64) and bench-train's (33 · 1024),
// and the learner's whole step (Trainer::learn: forward, V-trace, loss,
// backward, clipping, Adam) on a batch of the config's shape.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

#include "core/config.h"
#include "envs/env.h"
#include "learner/trainer.h"
#include "model/policy.h"
#include "model/policy_bench.h"
#include "model/policy_face.h"
#include "model/tensor_runtime.h"
#include "tools/bench_batch.h"
#include "tools/bench_timing.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

void bench_k(const EnvConfig& env_config, const ModelConfig& model_config, int64_t K, int repeats) {
  EnvConfig config = env_config;
  config.num_envs = K;
  auto env = envs::make_env(config, 1);
  const EnvSpec& spec = env->spec();
  std::vector<uint8_t> obs(spec.obs_bytes() * K);
  env->reset(obs.data());
  PolicyNet model(model_spec_for(spec, model_config));
  InferencePolicy stock_policy(model, spec, K, ModelConfig::FastPath::kOff, 1);
  InferencePolicy fused_policy(model, spec, K, ModelConfig::FastPath::kAuto, 1);
  if (!fused_policy.fused()) {
    std::cout << fmt::format("bench policy: {}: the fused path does not run this model\n",
                             spec.name);
    return;
  }
  const bool continuous = spec.action_kind == ActionKind::kContinuous;
  std::vector<int32_t> discrete(K);
  std::vector<float> sample(K * spec.action_size), clipped(K * spec.action_size), log_probs(K);
  ActionsOut into{.log_probs = log_probs.data()};
  if (continuous) {
    into.continuous = sample.data(), into.clipped = clipped.data();
  } else {
    into.discrete = discrete.data();
  }
  torch::InferenceMode inference;
  const double stock = median_us([&] { stock_policy.act(obs.data(), false, into); }, repeats, 10);
  const double fused = median_us([&] { fused_policy.act(obs.data(), false, into); }, repeats, 10);
  std::cout << fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.1f}× |\n", spec.name,
                           K, stock, fused, 1e3 * stock / static_cast<double>(K),
                           1e3 * fused / static_cast<double>(K), stock / fused);
}

// The learner's model forward and backward over `rows` observations (a
// stand-in loss reaching every output), fused against LibTorch.
void bench_learner(const EnvConfig& env_config, const ModelConfig& model_config, int64_t rows,
                   int repeats) {
  EnvConfig config = env_config;
  config.num_envs = 1;
  const EnvSpec spec = envs::make_env(config, 1)->spec();
  PolicyNet model(model_spec_for(spec, model_config));
  std::vector<int64_t> shape = {1, rows};  // one step of `rows` envs
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  const at::Tensor obs = at::randn(shape);
  auto step = [&](ModelConfig::FastPath mode) {
    ModelConfig path_config = model_config;
    path_config.fast_path = mode;
    TrainingPolicy policy(model, at::kCPU, path_config, LearnerConfig{});  // the same weights
    return median_us(
        [&] {
          model->zero_grad();
          const PolicyOutput out = policy.forward(obs, at::Tensor(), at::Tensor());
          (out.logits.sum() + out.value.sum()).backward();
        },
        repeats, 10);
  };
  const double stock = step(ModelConfig::FastPath::kOff);
  const double fused = step(ModelConfig::FastPath::kAuto);
  std::cout << fmt::format("| {} | {} | {:.0f} | {:.0f} | {:.1f}× |\n", spec.name, rows, stock,
                           fused, stock / fused);
}

// The matrix products of the learner's fused forward and backward over
// `rows` (at the model's widths), by each backend this CPU has, in µs
// (median).
void bench_products(const EnvConfig& env_config, const ModelConfig& model_config, int64_t rows,
                    int repeats) {
  EnvConfig config = env_config;
  config.num_envs = 1;
  const EnvSpec spec = envs::make_env(config, 1)->spec();
  const policy_bench::ProductTimes times = policy_bench::time_learner_products(
      model_spec_for(spec, model_config), rows,
      [&](const std::function<void()>& f) { return median_us(f, repeats, 10); });
  std::cout << fmt::format("| {} | {} | {:.0f} |", spec.name, rows, times.openblas_us);
  for (const std::optional<double>& eigen : {times.avx2_us, times.avx512_us}) {
    if (eigen) {
      std::cout << fmt::format(" {:.0f} ({:.2f}) |", *eigen, *eigen / times.openblas_us);
    } else {
      std::cout << " (not this CPU) |";
    }
  }
  std::cout << "\n";
}

// One learner step (Trainer::learn) on a random batch shaped as the
// config's: T = actor.unroll_length, N = learner.batch_size · env.num_envs.
void bench_learner_step(const Config& base, int repeats) {
  const EnvSpec spec = envs::make_env(base.env, 1)->spec();
  const int64_t T = base.actor.unroll_length, N = base.learner.batch_size * base.env.num_envs;
  const learner::Batch b = random_learner_batch(spec, T, N);
  auto step = [&](ModelConfig::FastPath mode) {
    Config c = base;
    c.model.fast_path = mode;
    // Every step's work, without the weights moving: random batches would
    // drive them to a non-finite loss, which ends the step.
    c.learner.learning_rate = 0;
    learner::Trainer trainer(c, spec);
    return median_us([&] { trainer.learn(b, 0.0); }, repeats, 10);
  };
  const double stock = step(ModelConfig::FastPath::kOff);
  const double fused = step(ModelConfig::FastPath::kAuto);
  std::cout << fmt::format("| {} | {} × {} | {:.0f} | {:.0f} | {:.1f}× |\n", spec.name, T + 1, N,
                           stock, fused, stock / fused);
}

}  // namespace

CLI::App* add_bench_policy(CLI::App& bench, std::function<void()>& run) {
  struct Args {
    EnvConfig env;
    ModelConfig model;
    std::vector<int64_t> num_envs = {1, 32, 256, 4096};
    int repeats = 2000;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command =
      bench.add_subcommand("policy", "An actor's policy step: the fused MLP path against LibTorch");
  command->add_option("--env", args->env.name, "built-in env name")->capture_default_str();
  command->add_option("--num-envs", args->num_envs, "K: rows per step, each size in turn")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  command->add_option("--hidden", args->model.hidden, "MLP hidden widths")->capture_default_str();
  command->add_flag("--separate-value", args->model.separate_value,
                    "the value head on an MLP of its own (model.separate_value)");
  command->add_option("--value-hidden", args->model.value_hidden,
                      "that MLP's widths (model.value_hidden; default: --hidden's)");
  command->add_option("--repeats", args->repeats, "timed steps per figure (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  run = [args] {
    set_compute_threads(1);
    std::cout << "matrix products: " << policy_bench::matrix_product_backend()
              << " (model/fast_gemm.h)\n\n";
    std::cout << "| env | K | LibTorch µs/step | fused µs/step | LibTorch ns/row | fused ns/row "
                 "| speed-up |\n|---|---:|---:|---:|---:|---:|---:|\n";
    for (int64_t K : args->num_envs) bench_k(args->env, args->model, K, args->repeats);
    std::cout << "\nlearner: model forward + backward\n\n| env | rows | LibTorch µs | fused µs "
                 "| speed-up |\n|---|---:|---:|---:|---:|\n";
    for (int64_t rows : {128, 1088, 33792}) {  // 128: a MuJoCo preset's minibatch
      bench_learner(args->env, args->model, rows, std::max(3, args->repeats / 20));
    }
    std::cout << "\nlearner: the matrix products of one forward + backward\n\n| env | rows "
                 "| OpenBLAS µs | Eigen AVX2 µs (÷ OpenBLAS) | Eigen AVX-512 µs (÷ OpenBLAS) "
                 "|\n|---|---:|---:|---:|---:|\n";
    bench_products(args->env, args->model, 1088, std::max(3, args->repeats / 4));
    std::cout << "\nlearner: the whole step, built-in defaults for the rest\n\n| env | rows "
                 "| LibTorch µs | fused µs | speed-up |\n|---|---:|---:|---:|---:|\n";
    Config config = load_config("", {"learner.device=cpu"});
    config.env.name = args->env.name;
    config.model.hidden = args->model.hidden;
    config.model.separate_value = args->model.separate_value;
    config.model.value_hidden = args->model.value_hidden;
    bench_learner_step(config, std::max(3, args->repeats / 10));
  };
  return command;
}

}  // namespace pronghorn::cli
