// The learner's policy losses (docs/architecture.md §3), each one fused kernel that
// computes the loss terms and their gradients with respect to the policy head
// and the value in one pass, wrapped so autograd carries those gradients into
// the model: call it like any op, then total.backward(). The math is in
// kernels/loss_math.h.
//
// Shapes and dtypes (T steps, B columns, A actions or D action dims), all
// float32 unless noted, on one device (CPU or CUDA):
//   logits               [T, B, A]       categorical head (differentiable)
//   mean, log_std        [T, B, D]       Gaussian head (differentiable)
//   values               [T, B]          value head (differentiable)
//   actions              int64 [T, B]    categorical; float32 [T, B, D] Gaussian
//   behaviour_log_probs  [T, B]          log μ(a) from the actor; PPO needs it,
//                                        IMPALA uses it for diagnostics only
//                                        (may be undefined there)
//   advantages           [T, B]          IMPALA: V-trace pg advantages;
//                                        PPO: V-trace pg advantages or GAE
//   value_targets        [T, B]          vs or GAE returns
//   old_values           [T, B]          the values the batch started with,
//                                        for options.value_clip (may be
//                                        undefined: no clipping)
// Reduction over the N = T·B samples: mean (default) or sum, for every term.
// Test: kernels/losses_test.cpp. Bench: `pronghorn bench kernels`.
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/loss_math.h"

namespace pronghorn::kernels {

struct LossOptions {
  LossKind kind = LossKind::kImpala;
  float baseline_cost = 0.5f;
  float entropy_cost = 0.01f;
  float ppo_clip = 0.2f;
  bool mean_reduction = true;  // false: sum over samples
  float value_clip = 0.0f;     // > 0: PPO's value clipping against old_values
};

// Every field a 0-dim float32 tensor. Only `total` carries gradients.
struct LossResult {
  at::Tensor total;          // policy + baseline_cost·value − entropy_cost·entropy
  at::Tensor policy;         // reduced policy-gradient loss
  at::Tensor value;          // reduced ½(target − V)² (clipped: kernels/loss_math.h)
  at::Tensor entropy;        // reduced policy entropy
  at::Tensor mean_ratio;     // mean of π/μ (1 without behaviour log-probs)
  at::Tensor clip_fraction;  // fraction of samples with |π/μ − 1| > ppo_clip
  at::Tensor approx_kl;      // mean of (r − 1) − log r, an estimate of KL(μ‖π)
};

LossResult categorical_loss(const at::Tensor& logits, const at::Tensor& values,
                            const at::Tensor& actions, const at::Tensor& behaviour_log_probs,
                            const at::Tensor& advantages, const at::Tensor& value_targets,
                            const LossOptions& options, const at::Tensor& old_values = {});

LossResult gaussian_loss(const at::Tensor& mean, const at::Tensor& log_std,
                         const at::Tensor& values, const at::Tensor& actions,
                         const at::Tensor& behaviour_log_probs, const at::Tensor& advantages,
                         const at::Tensor& value_targets, const LossOptions& options,
                         const at::Tensor& old_values = {});

}  // namespace pronghorn::kernels
