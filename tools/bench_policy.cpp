// `pronghorn bench policy`: an actor's inference step (policy forward and
// sampling of K actions with their log-probs) with the fused MLP path
// (model.fast_path = auto, model/fast_mlp.h) against LibTorch (off), in the
// same run, on the env's observations, one thread; median of many steps.
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
#include <vector>

#include "core/config.h"
#include "envs/env.h"
#include "learner/trainer.h"
#include "model/fast_gemm.h"
#include "model/fast_gemm_avx512.h"
#include "model/fast_mlp.h"
#include "model/fast_mlp_train.h"
#include "model/policy.h"
#include "model/sampling.h"
#include "model/tensor_runtime.h"
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
  auto fast = FastMlp::make_for(*model, spec, ModelConfig::FastPath::kAuto, 1);
  if (!fast) {
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
  const double stock = median_us(
      [&] {
        sample_actions(model->forward(observation_tensor(obs.data(), spec, K)), spec, false, into);
      },
      repeats, 10);
  const double fused = median_us(
      [&] { fast->act(reinterpret_cast<const float*>(obs.data()), K, spec, false, into); }, repeats,
      10);
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
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  const at::Tensor obs = at::randn(shape);
  auto step = [&](ModelConfig::FastPath mode) {
    return median_us(
        [&] {
          model->zero_grad();
          const PolicyOutput out = policy_forward(*model, obs, mode);
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
// `rows` (model/fast_mlp_train.cpp's, at the model's widths), by each
// backend this CPU has, in µs (median).
void bench_products(const EnvConfig& env_config, const ModelConfig& model_config, int64_t rows,
                    int repeats) {
  EnvConfig config = env_config;
  config.num_envs = 1;
  const EnvSpec spec = envs::make_env(config, 1)->spec();
  const ModelSpec model = model_spec_for(spec, model_config);
  std::vector<int64_t> width = {1};
  for (int64_t d : model.obs_shape) width[0] *= d;
  width.insert(width.end(), model.hidden.begin(), model.hidden.end());
  width.push_back(model.actions);  // the policy head
  int64_t widest = 1;
  for (int64_t w : width) widest = std::max(widest, w);
  std::vector<float> x(rows * widest, 0.5f), y(rows * widest), w(widest * widest, 0.01f),
      dw(widest * widest);
  using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                        int64_t, float, float*, int64_t);
  auto time = [&](Gemm gemm) {
    return median_us(
        [&] {
          for (size_t l = 0; l + 1 < width.size(); ++l) {
            const int64_t in = width[l], out = width[l + 1];
            gemm(false, true, rows, out, in, x.data(), in, w.data(), in, 0.0f, y.data(), out);
            gemm(true, false, out, in, rows, y.data(), out, x.data(), in, 1.0f, dw.data(), in);
            if (l > 0) {
              gemm(false, false, rows, in, out, y.data(), out, w.data(), in, 0.0f, x.data(), in);
            }
          }
        },
        repeats, 10);
  };
  const double openblas = time(fast_mlp::gemm_openblas);
  std::cout << fmt::format("| {} | {} | {:.0f} |", spec.name, rows, openblas);
  if (fast_mlp::has_avx512()) {
    const double eigen = time(fast_mlp::gemm_avx512);
    std::cout << fmt::format(" {:.0f} | {:.2f} |\n", eigen, eigen / openblas);
  } else {
    std::cout << " (no AVX-512) | |\n";
  }
}

// One learner step (Trainer::learn) on a random batch shaped as the
// config's: T = actor.unroll_length, N = learner.batch_size · env.num_envs.
void bench_learner_step(const Config& base, int repeats) {
  const EnvSpec spec = envs::make_env(base.env, 1)->spec();
  const int64_t T = base.actor.unroll_length, N = base.learner.batch_size * base.env.num_envs;
  at::manual_seed(1);
  learner::Batch b;
  std::vector<int64_t> obs_shape = {T + 1, N};
  obs_shape.insert(obs_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  b.obs = at::randn(obs_shape);
  b.actions = at::randint(0, spec.action_size, {T, N}, at::kLong);
  b.rewards = at::randn({T, N});
  b.discounts = at::full({T, N}, 0.99f);
  b.truncated = at::zeros({T, N}, at::kByte);
  b.final_values = at::zeros({T, N});
  b.behaviour_log_probs = at::full({T, N}, -0.69f);
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
  command->add_option("--repeats", args->repeats, "timed steps per figure (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  run = [args] {
    set_compute_threads(1);
    std::cout << "matrix products: " << fast_mlp::gemm_backend() << " (model/fast_gemm.h)\n\n";
    std::cout << "| env | K | LibTorch µs/step | fused µs/step | LibTorch ns/row | fused ns/row "
                 "| speed-up |\n|---|---:|---:|---:|---:|---:|---:|\n";
    for (int64_t K : args->num_envs) bench_k(args->env, args->model, K, args->repeats);
    std::cout << "\nlearner: model forward + backward\n\n| env | rows | LibTorch µs | fused µs "
                 "| speed-up |\n|---|---:|---:|---:|---:|\n";
    for (int64_t rows : {1088, 33792}) {
      bench_learner(args->env, args->model, rows, std::max(3, args->repeats / 20));
    }
    std::cout << "\nlearner: the matrix products of one forward + backward\n\n| env | rows "
                 "| OpenBLAS µs | Eigen AVX-512 µs | ratio |\n|---|---:|---:|---:|---:|\n";
    bench_products(args->env, args->model, 1088, std::max(3, args->repeats / 4));
    std::cout << "\nlearner: the whole step, built-in defaults for the rest\n\n| env | rows "
                 "| LibTorch µs | fused µs | speed-up |\n|---|---:|---:|---:|---:|\n";
    Config config = load_config("", {"learner.device=cpu"});
    config.env.name = args->env.name;
    config.model.hidden = args->model.hidden;
    bench_learner_step(config, std::max(3, args->repeats / 10));
  };
  return command;
}

}  // namespace pronghorn::cli
