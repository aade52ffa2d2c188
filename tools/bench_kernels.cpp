// `pronghorn bench kernels`: time per call of the fused V-trace and the fused
// IMPALA loss (forward and backward) against, in the same run,
//   (a) the same computation as stock LibTorch ops, V-trace as a loop over
//       time the way Python learners write it, the loss through autograd;
//   (b) the floor: one memcpy of the bytes the kernel must read and write.
// Median of many calls; intra-op threads as given (default 1).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <vector>

#include "kernels/losses.h"
#include "kernels/vtrace.h"
#include "model/tensor_runtime.h"
#include "tools/bench_timing.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

// V-trace from logits with stock ops: a loop over time, as Python learners do.
at::Tensor vtrace_stock(const at::Tensor& logits, const at::Tensor& actions,
                        const at::Tensor& behaviour, const at::Tensor& discounts,
                        const at::Tensor& rewards, const at::Tensor& values,
                        const at::Tensor& bootstrap) {
  at::Tensor log_rhos =
      at::log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1) - behaviour;
  at::Tensor rhos = log_rhos.exp();
  at::Tensor clipped_rhos = at::clamp_max(rhos, 1.0), cs = at::clamp_max(rhos, 1.0);
  at::Tensor next_values = at::cat({values.slice(0, 1), bootstrap.unsqueeze(0)}, 0);
  at::Tensor deltas = clipped_rhos * (rewards + discounts * next_values - values);
  std::vector<at::Tensor> acc;
  at::Tensor carry = at::zeros_like(bootstrap);
  for (int64_t t = values.size(0) - 1; t >= 0; --t) {
    carry = deltas[t] + discounts[t] * cs[t] * carry;
    acc.push_back(carry);
  }
  std::reverse(acc.begin(), acc.end());
  at::Tensor vs = at::stack(acc) + values;
  at::Tensor next_vs = at::cat({vs.slice(0, 1), bootstrap.unsqueeze(0)}, 0);
  return at::clamp_max(rhos, 1.0) * (rewards + discounts * next_vs - values);
}

void report(const char* what, int64_t T, int64_t B, int64_t A, double fused, double stock,
            double floor) {
  std::cout << fmt::format(
      "bench kernels: {} T={} B={} A={}: fused {:.1f} us, stock LibTorch {:.1f} us ({:.1f}x), "
      "memcpy floor {:.1f} us (fused/floor {:.2f})\n",
      what, T, B, A, fused, stock, stock / fused, floor, fused / floor);
}

void bench_shape(int64_t T, int64_t B, int64_t A, int repeats) {
  at::manual_seed(0);
  at::Tensor logits = at::randn({T, B, A});
  at::Tensor actions = at::randint(0, A, {T, B}, at::kLong);
  at::Tensor behaviour = at::log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1) +
                         at::randn({T, B}) * 0.1;
  at::Tensor discounts = at::full({T, B}, 0.99f), rewards = at::randn({T, B});
  at::Tensor values = at::randn({T, B}), bootstrap = at::randn({B});
  const int64_t n = T * B;

  // V-trace reads logits, actions (int64), 4 [T, B] floats and writes 3.
  size_t vtrace_bytes = sizeof(float) * (n * A + 7 * n + B) + sizeof(int64_t) * n;
  std::vector<char> src(vtrace_bytes, 1), dst(vtrace_bytes);
  auto copy = [&](size_t bytes) {
    return [&, bytes] { std::memcpy(dst.data(), src.data(), bytes); };
  };
  kernels::VtraceParams params;
  double fused = median_us(
      [&] {
        kernels::vtrace_from_logits(logits, actions, behaviour, discounts, rewards, values,
                                    bootstrap, params);
      },
      repeats, 3);
  double stock = median_us(
      [&] { vtrace_stock(logits, actions, behaviour, discounts, rewards, values, bootstrap); },
      repeats, 3);
  report("vtrace", T, B, A, fused, stock, median_us(copy(vtrace_bytes), repeats, 3));

  // The loss reads logits, actions, 4 [T, B] floats; writes d logits, d values.
  size_t loss_bytes = sizeof(float) * (2 * n * A + 6 * n) + sizeof(int64_t) * n;
  src.resize(loss_bytes, 1);
  dst.resize(loss_bytes);
  at::Tensor adv = at::randn({T, B}), targets = at::randn({T, B});
  at::Tensor logits_param = logits.clone().requires_grad_();
  at::Tensor values_param = values.clone().requires_grad_();
  kernels::LossOptions options;
  double fused_loss = median_us(
      [&] {
        kernels::categorical_loss(logits_param, values_param, actions, behaviour, adv, targets,
                                  options)
            .total.backward();
      },
      repeats, 3);
  double stock_loss = median_us(
      [&] {
        at::Tensor log_p = at::log_softmax(logits_param, -1);
        at::Tensor log_pi = log_p.gather(-1, actions.unsqueeze(-1)).squeeze(-1);
        at::Tensor entropy = -(log_p.exp() * log_p).sum(-1);
        at::Tensor total = (-adv * log_pi).mean() +
                           0.5 * (0.5 * (targets - values_param).pow(2)).mean() -
                           0.01 * entropy.mean();
        total.backward();
      },
      repeats, 3);
  report("impala loss fwd+bwd", T, B, A, fused_loss, stock_loss,
         median_us(copy(loss_bytes), repeats, 3));
}

}  // namespace

CLI::App* add_bench_kernels(CLI::App& bench, std::function<void()>& run) {
  struct Args {
    int threads = 1;
    int repeats = 50;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = bench.add_subcommand(
      "kernels", "Fused V-trace and loss against stock LibTorch ops and a memcpy floor");
  command->add_option("--threads", args->threads, "LibTorch intra-op threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  command->add_option("--repeats", args->repeats, "timed calls per figure (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  run = [args] {
    set_compute_threads(args->threads);
    std::cout << fmt::format("bench kernels: {} intra-op thread(s)\n", at::get_num_threads());
    bench_shape(32, 2048, 6, args->repeats);
    bench_shape(80, 256, 6, args->repeats);
  };
  return command;
}

}  // namespace pronghorn::cli
