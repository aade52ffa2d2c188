// `pronghorn bench learner`: the learner's samples/s for one model on
// batches of a given shape, on the CPU (at each of --threads) or a CUDA
// device, one after the other in the same run. A step is Trainer::learn on a
// batch that starts on the CPU, as one taken from the ring does: the copy to
// the device, forward, V-trace (or GAE), loss, backward, clipping and Adam.
// The copy of the batch alone is timed too, the trainer's way (through pinned
// memory), as its share of the step; the weights' publication to the actors
// is not part of it. A step is learner.epochs × learner.minibatches optimizer
// steps (--set), each timed as its share; --action-dim gives a Gaussian head
// (the MuJoCo presets' learner: --set the preset's keys).
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "learner/batch.h"
#include "learner/trainer.h"
#include "model/tensor_runtime.h"
#include "tools/bench_batch.h"
#include "tools/bench_timing.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

struct LearnerBenchArgs {
  std::string model = "impala_cnn";
  std::vector<int64_t> obs_shape = {4, 84, 84};
  std::string obs_dtype = "uint8";
  int64_t actions = 6;
  int64_t unroll = 20;   // T
  int64_t columns = 32;  // N = B·K
  std::string device = "cpu";
  std::vector<int> threads = {1};
  std::string loss = "impala";
  int64_t action_dim = 0;         // > 0: continuous actions of this many dims
  std::vector<std::string> sets;  // config overrides, after the ones above
  int repeats = 20;
};

// An env that is only a shape: what the trainer reads of one.
EnvSpec shaped_spec(const LearnerBenchArgs& a) {
  EnvSpec spec;
  spec.name = fmt::format("{}[{}]", a.obs_dtype, fmt::join(a.obs_shape, "×"));
  spec.obs_dtype = a.obs_dtype == "uint8" ? Dtype::kUInt8 : Dtype::kFloat32;
  spec.obs_shape = a.obs_shape;
  spec.action_kind = a.action_dim > 0 ? ActionKind::kContinuous : ActionKind::kDiscrete;
  spec.action_size = a.action_dim > 0 ? a.action_dim : a.actions;
  if (a.action_dim > 0) {
    spec.action_low.assign(static_cast<size_t>(a.action_dim), -1.0f);
    spec.action_high.assign(static_cast<size_t>(a.action_dim), 1.0f);
  }
  return spec;
}

void wait_for(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// One row of the table, printed under its header (printed once, with the
// first row: an error before it leaves only its own line).
void bench_one(const LearnerBenchArgs& a, int threads, bool& header_printed) {
  const EnvSpec spec = shaped_spec(a);
  std::vector<std::string> overrides = {"learner.device=" + a.device, "model.kind=" + a.model,
                                        "loss.kind=" + a.loss};
  overrides.insert(overrides.end(), a.sets.begin(), a.sets.end());
  Config config = load_config("", overrides);
  // Every step's work without the weights moving: random batches would drive
  // them to a non-finite loss, which ends a step.
  config.learner.learning_rate = 0;
  set_compute_threads(threads);
  learner::Trainer trainer(config, spec);
  const at::Device device = trainer.device();
  const learner::Batch batch = random_learner_batch(spec, a.unroll, a.columns);
  const double step_us = median_us(
      [&] {
        trainer.learn(batch, 0.0);
        wait_for(device);
      },
      a.repeats, std::min(a.repeats, 2));
  double copy_us = 0;
  if (!device.is_cpu()) {
    copy_us = median_us(
        [&] {
          learner::Batch moved = learner::map_tensors(batch, [&](const at::Tensor& t) {
            return t.pin_memory().to(device, /*non_blocking=*/true);
          });
          wait_for(device);
        },
        a.repeats, std::min(a.repeats, 2));
  }
  if (!std::exchange(header_printed, true)) {
    std::cout << "| model | parameters | device | threads | T × N | ms/step | optimizer steps "
                 "| µs/optimizer step | batch copy | samples/s |\n"
                 "|---|---:|---|---:|---|---:|---:|---:|---:|---:|\n";
  }
  int64_t parameters = 0;
  for (const at::Tensor& p : trainer.model()->parameters()) parameters += p.numel();
  const double samples = static_cast<double>(a.unroll * a.columns);
  // learner.epochs × learner.minibatches optimizer steps a batch.
  const int64_t optimizer_steps = trainer.steps_per_batch();
  std::cout << fmt::format(
      "| {} | {} | {} | {} | {} × {} | {:.2f} | {} | {:.0f} | {} | {:.0f} |\n", a.model, parameters,
      device.is_cpu() ? "cpu" : device.str(), device.is_cpu() ? fmt::format("{}", threads) : "—",
      a.unroll, a.columns, step_us / 1e3, optimizer_steps,
      step_us / static_cast<double>(optimizer_steps),
      device.is_cpu() ? std::string("—") : fmt::format("{:.0f} %", 100 * copy_us / step_us),
      samples / (step_us / 1e6));
}

}  // namespace

CLI::App* add_bench_learner(CLI::App& bench, std::function<void()>& run) {
  auto args = std::make_shared<LearnerBenchArgs>();
  CLI::App* command = bench.add_subcommand(
      "learner", "The learner's samples/s for one model on batches of a given shape");
  command->add_option("--model", args->model, "model.kind")
      ->check(CLI::IsMember({"mlp", "impala_cnn", "nature_cnn"}))
      ->capture_default_str();
  command->add_option("--obs-shape", args->obs_shape, "one observation's shape")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--obs-dtype", args->obs_dtype, "observation type")
      ->check(CLI::IsMember({"uint8", "float32"}))
      ->capture_default_str();
  command->add_option("--actions", args->actions, "discrete actions")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 16))
      ->capture_default_str();
  command->add_option("--unroll", args->unroll, "T: steps per unroll")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  command->add_option("--columns", args->columns, "N: unrolls × envs per unroll in a batch")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  command->add_option("--device", args->device, "learner.device: cpu, cuda or cuda:N")
      ->capture_default_str();
  command->add_option("--threads", args->threads, "CPU threads, each count in turn")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--loss", args->loss, "loss.kind")
      ->check(CLI::IsMember({"impala", "ppo"}))
      ->capture_default_str();
  command
      ->add_option("--action-dim", args->action_dim,
                   "continuous actions in [-1, 1] of this many dims (a Gaussian head) instead "
                   "of --actions")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 16));
  command->add_option("--set", args->sets,
                      "KEY=VALUE config overrides, e.g. learner.epochs=10 (repeatable)");
  command->add_option("--repeats", args->repeats, "timed steps per figure (median)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  run = [args] {
    bool header_printed = false;
    if (args->device == "cpu") {
      for (int threads : args->threads) bench_one(*args, threads, header_printed);
    } else {
      bench_one(*args, args->threads.front(), header_printed);
    }
  };
  return command;
}

}  // namespace pronghorn::cli
