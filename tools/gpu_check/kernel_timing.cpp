// See kernel_timing.h. Bytes are what each kernel must read and write at
// least (every input element once, every output once); a copy of half that
// many bytes reads and writes the same total, and the ratio is copy time over
// kernel time: 1.0 means the kernel runs at copy bandwidth.
#include "tools/gpu_check/kernel_timing.h"

#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include "kernels/losses_cuda.h"
#include "kernels/vtrace_cuda.h"
#include "tools/gpu_check/kernel_inputs.h"

namespace pronghorn::gpu_check {
namespace {

constexpr int kWarmup = 3;

void row(const char* kernel, int64_t T, int64_t B, int64_t A, double bytes,
         const std::function<void()>& launch, int repeats) {
  const double kernel_s = median_seconds(launch, kWarmup, repeats);
  const std::size_t half = static_cast<std::size_t>(bytes / 2);
  DeviceArray<char> from(half), to(half);
  const double copy_s = median_seconds(
      [&] {
        check_cuda(cudaMemcpyAsync(to.get(), from.get(), half, cudaMemcpyDeviceToDevice),
                   "cudaMemcpyAsync D2D");
      },
      kWarmup, repeats);
  std::printf("  %-12s %3lld %6lld %3lld %9.2f %10.1f %9.1f %10.1f %9.1f %7.2f\n", kernel,
              static_cast<long long>(T), static_cast<long long>(B), static_cast<long long>(A),
              bytes / 1e6, kernel_s * 1e6, bytes / kernel_s / 1e9, copy_s * 1e6,
              bytes / copy_s / 1e9, copy_s / kernel_s);
  std::fflush(stdout);
}

void check(const char* error, const char* kernel) {
  if (error != nullptr) throw std::runtime_error(std::string(kernel) + " launch: " + error);
}

// V-trace or GAE from logits, with truncation (CartPole's time limit).
void advantage_row(bool gae, int64_t T, int64_t B, int64_t A, int repeats) {
  const AdvantageHost h = random_advantage_inputs(T, B, A, Ends::kTruncation, 1);
  const AdvantageDevice d(h);
  AdvantageDeviceResult out(T * B);
  const kernels::AdvantageInputs in = view(h, d, /*from_logits=*/true);
  const kernels::VtraceParams params{1.0f, 1.0f, 1.0f, 0.95f};
  const double n = static_cast<double>(T * B);
  // logits; actions (int64); behaviour, discounts, rewards, values, truncated,
  // final values; bootstrap; out: first, second, clipped ρ.
  const double bytes = n * A * 4 + n * 8 + n * 6 * 4 + B * 4 + n * 3 * 4;
  row(
      gae ? "GAE" : "V-trace", T, B, A, bytes,
      [&] { check(kernels::cuda::advantages(in, params, gae, out.view(), nullptr), "advantages"); },
      repeats);
}

void loss_row(bool gaussian, int64_t T, int64_t B, int64_t A, int repeats) {
  const int64_t N = T * B;
  const LossHost h = random_loss_inputs(N, A, gaussian, /*extreme=*/false, 2);
  const LossDevice d(h);
  LossDeviceResult out(N, A);
  const kernels::LossInputs in = view(h, d);
  const kernels::LossParams p{kernels::LossKind::kPpo, 0.5f, 0.01f, 0.2f, 1.0f / N};
  const double n = static_cast<double>(N);
  // In: the policy head (logits + int64 actions, or mean, log-std and
  // actions); behaviour, advantages, values, targets. Out: the policy head's
  // gradients, d/d values, 6 terms.
  const double head_in = gaussian ? n * A * 3 * 4 : n * A * 4 + n * 8;
  const double head_out = gaussian ? n * A * 2 * 4 : n * A * 4;
  const double bytes = head_in + n * 4 * 4 + head_out + n * 4 + n * 6 * 4;
  row(
      gaussian ? "Gaussian" : "categorical", T, B, A, bytes,
      [&] {
        check(gaussian ? kernels::cuda::gaussian_loss(in, p, out.view(), nullptr)
                       : kernels::cuda::categorical_loss(in, p, out.view(), nullptr),
              "loss");
      },
      repeats);
}

}  // namespace

void run_kernel_timings(int repeats) {
  std::printf(
      "timings: median of %d after %d warm-up runs (CUDA events); losses are PPO; MB = bytes the "
      "kernel must read + write;\n  copy = cudaMemcpyDeviceToDevice of MB/2 (same bytes read + "
      "written); "
      "ratio = copy time / kernel time (1.0 = at copy bandwidth)\n",
      repeats, kWarmup);
  std::printf("  %-12s %3s %6s %3s %9s %10s %9s %10s %9s %7s\n", "kernel", "T", "B", "A", "MB",
              "kernel us", "GB/s", "copy us", "GB/s", "ratio");
  for (int64_t T : {20, 80}) {
    for (int64_t B : {256, 4096, 65536}) {
      advantage_row(false, T, B, 2, repeats);
      advantage_row(true, T, B, 2, repeats);
      loss_row(false, T, B, 2, repeats);
      loss_row(true, T, B, 6, repeats);
    }
  }
}

}  // namespace pronghorn::gpu_check
