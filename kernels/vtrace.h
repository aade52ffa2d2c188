// V-trace targets and GAE(λ) advantages for the learner (docs/architecture.md §3), from
// target logits in one fused pass: log-softmax, gather of the taken action,
// importance ratio, clipping and the reverse scan. The math, and exactly what
// "truncated" does, is in kernels/vtrace_math.h.
//
// Shapes and dtypes (T steps, B columns = unrolls × envs, A actions):
//   target_logits        float32 [T, B, A]
//   actions              int64   [T, B]
//   behaviour_log_probs  float32 [T, B]  log μ(a_t) recorded by the actor
//   log_rhos             float32 [T, B]  instead of the three above
//   discounts            float32 [T, B]  γ·(1 − terminated)
//   rewards, values      float32 [T, B]
//   bootstrap_values     float32 [B]     V(x_T)
//   truncation.truncated uint8/bool [T, B] and truncation.final_values
//                        float32 [T, B], V of the final observation where
//                        a time limit cut the episode; both undefined = none.
// Every output is float32 [T, B] on the inputs' device. Inputs may be
// non-contiguous (they are made contiguous); no autograd: targets are
// constants of the loss. CPU and CUDA tensors; a wrong shape, dtype or
// device throws pronghorn::Error naming the argument.
// Test: kernels/vtrace_test.cpp. Bench: `pronghorn bench kernels`.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/vtrace_math.h"

namespace pronghorn::kernels {

struct Truncation {
  at::Tensor truncated;     // [T, B] bool or uint8
  at::Tensor final_values;  // [T, B] float32
};

struct VtraceResult {
  at::Tensor vs;             // value targets
  at::Tensor pg_advantages;  // min(ρ̄_pg, π/μ)·(r + γ q − V)
  at::Tensor clipped_rhos;   // min(ρ̄, π/μ)
};

struct GaeResult {
  at::Tensor advantages;
  at::Tensor returns;  // value targets: V + advantages
  at::Tensor clipped_rhos;
};

VtraceResult vtrace_from_logits(const at::Tensor& target_logits, const at::Tensor& actions,
                                const at::Tensor& behaviour_log_probs, const at::Tensor& discounts,
                                const at::Tensor& rewards, const at::Tensor& values,
                                const at::Tensor& bootstrap_values, const VtraceParams& params,
                                const Truncation& truncation = {});

VtraceResult vtrace_from_log_rhos(const at::Tensor& log_rhos, const at::Tensor& discounts,
                                  const at::Tensor& rewards, const at::Tensor& values,
                                  const at::Tensor& bootstrap_values, const VtraceParams& params,
                                  const Truncation& truncation = {});

// GAE(λ = params.lambda) weighted by the same clipped ratios (ρ̄, c̄).
GaeResult gae_from_logits(const at::Tensor& target_logits, const at::Tensor& actions,
                          const at::Tensor& behaviour_log_probs, const at::Tensor& discounts,
                          const at::Tensor& rewards, const at::Tensor& values,
                          const at::Tensor& bootstrap_values, const VtraceParams& params,
                          const Truncation& truncation = {});

// The same from log π/μ given directly (a Gaussian head's, as
// vtrace_from_log_rhos takes them).
GaeResult gae_from_log_rhos(const at::Tensor& log_rhos, const at::Tensor& discounts,
                            const at::Tensor& rewards, const at::Tensor& values,
                            const at::Tensor& bootstrap_values, const VtraceParams& params,
                            const Truncation& truncation = {});

}  // namespace pronghorn::kernels
