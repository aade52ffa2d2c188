// See kernel_cases.h. The grid is kernels/vtrace_test.cpp's and
// kernels/losses_test.cpp's: T ∈ {1, 5, 80}, B ∈ {1, 7, 256}, A ∈ {1, 2, 18},
// every episode-end pattern, both ways of giving log(π/μ), V-trace and GAE;
// both policy heads, IMPALA and PPO, mean and sum, ordinary and extreme.
//
// The host runs the very functions the kernels run (the math is float only,
// so there is no double version to compare with; kernels/*_test.cpp check
// that math against float64 LibTorch). What may differ is only rounding: nvcc
// contracts a·b + c into one fused multiply-add, the host compiler does not,
// and across an 80-step scan or a softmax over 18 logits such differences add
// up to a few float32 epsilons of the largest value. Tolerances below.
#include "tools/gpu_check/kernel_cases.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/losses_cuda.h"
#include "kernels/vtrace_cuda.h"
#include "tools/gpu_check/compare.h"
#include "tools/gpu_check/kernel_inputs.h"

namespace pronghorn::gpu_check {
namespace {

// Scans and softmaxes: 1e-5 relative, or 1e-5 of the output's largest value
// (about 80 float32 epsilons: the trace of an 80-step scan).
constexpr Tolerance kScanTolerance{1e-5, 1e-5};
// The extreme loss cases multiply by ratios up to e^20 terms that cancel
// (z² − 1, r·adv against its clipped twin): judge them against the largest
// value of the output, as kernels/losses_test.cpp does.
constexpr Tolerance kExtremeTolerance{1e-4, 1e-5};

constexpr int64_t kTs[] = {1, 5, 80};
constexpr int64_t kBs[] = {1, 7, 256};
constexpr int64_t kAs[] = {1, 2, 18};

void check_launch(const char* error, const char* kernel) {
  if (error != nullptr) throw std::runtime_error(std::string(kernel) + " launch: " + error);
  check_cuda(cudaDeviceSynchronize(), kernel);
}

std::string shape_text(int64_t T, int64_t B, int64_t A) {
  return "T=" + std::to_string(T) + " B=" + std::to_string(B) + " A=" + std::to_string(A);
}

// Device and host advantages of one input, compared into `cmp`.
void compare_advantages(const AdvantageHost& h, const AdvantageDevice& d, bool from_logits,
                        bool gae, const kernels::VtraceParams& params, Comparison& cmp) {
  const int64_t n = h.T * h.B;
  AdvantageResult want(n);
  const kernels::AdvantageInputs host_in = view(h, from_logits);
  for (int64_t b = 0; b < h.B; ++b) {
    kernels::advantage_column(host_in, params, gae, b, want.view());
  }
  AdvantageDeviceResult out(n);
  check_launch(kernels::cuda::advantages(view(h, d, from_logits), params, gae, out.view(), nullptr),
               gae ? "GAE" : "V-trace");
  const std::string where = shape_text(h.T, h.B, h.A) + " ";
  cmp.add(where + (gae ? "returns" : "vs"), out.first.to_host(), want.first, kScanTolerance);
  cmp.add(where + (gae ? "advantages" : "pg_advantages"), out.second.to_host(), want.second,
          kScanTolerance);
  cmp.add(where + "clipped_rhos", out.rhos.to_host(), want.rhos, kScanTolerance);
}

int advantage_cases() {
  const kernels::VtraceParams params{/*rho_bar=*/1.0f, /*c_bar=*/0.9f, /*rho_pg_bar=*/1.5f,
                                     /*lambda=*/0.95f};
  int failed = 0;
  for (Ends ends : kAllEnds) {
    Comparison cmp[2][2];  // [gae][from_logits]
    for (int64_t T : kTs) {
      for (int64_t B : kBs) {
        for (int64_t A : kAs) {
          const AdvantageHost h =
              random_advantage_inputs(T, B, A, ends, 1000 * T + 10 * B + A + 7919 * int(ends));
          const AdvantageDevice d(h);
          for (bool gae : {false, true}) {
            for (bool from_logits : {true, false}) {
              compare_advantages(h, d, from_logits, gae, params, cmp[gae][from_logits]);
            }
          }
        }
      }
    }
    for (bool gae : {false, true}) {
      for (bool from_logits : {true, false}) {
        const Comparison& c = cmp[gae][from_logits];
        c.print(std::string(gae ? "GAE      " : "V-trace  ") +
                (from_logits ? "from logits   " : "from log_rhos ") + ends_name(ends));
        failed += c.passed() ? 0 : 1;
      }
    }
  }
  return failed;
}

const char* const kTermNames[kernels::kLossTerms] = {"policy", "value",   "entropy",
                                                     "ratio",  "clipped", "kl"};

// Device and host losses of one input, compared into `cmp`.
void compare_losses(const LossHost& h, const kernels::LossParams& p, const std::string& where,
                    Tolerance tol, Comparison& cmp) {
  LossResult want(h.N, h.A);
  const kernels::LossInputs host_in = view(h);
  for (int64_t i = 0; i < h.N; ++i) {
    if (h.gaussian) {
      kernels::gaussian_loss_sample(host_in, p, i, want.view());
    } else {
      kernels::categorical_loss_sample(host_in, p, i, want.view());
    }
  }
  const LossDevice d(h);
  LossDeviceResult out(h.N, h.A);
  const kernels::LossInputs in = view(h, d);
  check_launch(h.gaussian ? kernels::cuda::gaussian_loss(in, p, out.view(), nullptr)
                          : kernels::cuda::categorical_loss(in, p, out.view(), nullptr),
               h.gaussian ? "Gaussian loss" : "categorical loss");
  cmp.add(where + (h.gaussian ? "d/d mean" : "d/d logits"), out.grad_policy.to_host(),
          want.grad_policy, tol);
  if (h.gaussian)
    cmp.add(where + "d/d log_std", out.grad_log_std.to_host(), want.grad_log_std, tol);
  cmp.add(where + "d/d values", out.grad_values.to_host(), want.grad_values, tol);
  const std::vector<float> terms = out.terms.to_host();
  for (int term = 0; term < kernels::kLossTerms; ++term) {  // each term at its own scale
    const auto got_first = terms.begin() + term * h.N;
    const auto want_first = want.terms.begin() + term * h.N;
    cmp.add(where + kTermNames[term], std::vector<float>(got_first, got_first + h.N),
            std::vector<float>(want_first, want_first + h.N), tol);
  }
}

int loss_cases() {
  int failed = 0;
  for (bool gaussian : {false, true}) {
    for (kernels::LossKind kind : {kernels::LossKind::kImpala, kernels::LossKind::kPpo}) {
      for (bool mean : {true, false}) {
        for (bool extreme : {false, true}) {
          Comparison cmp;
          for (int64_t T : kTs) {
            for (int64_t B : kBs) {
              for (int64_t A : kAs) {
                const int64_t N = T * B;
                kernels::LossParams p{kind, 0.5f, 0.01f, 0.2f, mean ? 1.0f / N : 1.0f};
                const LossHost h = random_loss_inputs(N, A, gaussian, extreme,
                                                      T * 1000 + B * 10 + A + (gaussian ? 7 : 0));
                compare_losses(h, p, shape_text(T, B, A) + " ",
                               extreme ? kExtremeTolerance : kScanTolerance, cmp);
              }
            }
          }
          cmp.print(std::string(gaussian ? "Gaussian    " : "categorical ") +
                    (kind == kernels::LossKind::kPpo ? "PPO    " : "IMPALA ") +
                    (mean ? "mean " : "sum  ") + (extreme ? "extreme" : ""));
          failed += cmp.passed() ? 0 : 1;
        }
      }
    }
  }
  return failed;
}

}  // namespace

int run_kernel_cases() {
  std::printf(
      "kernels: device against the same *_math.h on the host (float; |device - host| <= "
      "rtol*|host| + atol*max|host| per output; rtol = atol = %.0e, extreme losses rtol %.0e)\n"
      "  over T in {1,5,80} x B in {1,7,256} x A in {1,2,18}; max rel over values above the "
      "atol floor\n",
      kScanTolerance.rtol, kExtremeTolerance.rtol);
  std::fflush(stdout);
  const int failed = advantage_cases() + loss_cases();
  std::fflush(stdout);
  return failed;
}

}  // namespace pronghorn::gpu_check
