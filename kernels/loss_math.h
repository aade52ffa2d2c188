// The math of the policy losses, once, for one sample i of N = T·B (DESIGN.md
// §3): the loss terms and their gradients with respect to the policy head
// (categorical logits, or Gaussian mean and log-std) and the value, in one
// pass. Called by the CPU loop (losses_cpu.cpp) and the CUDA kernel
// (losses.cu); no LibTorch here.
//
// Per sample, with log π = log-prob of the taken action under the learner's
// policy, μ = the behaviour log-prob recorded by the actor, r = exp(log π − μ):
//   IMPALA  policy = −adv · log π
//   PPO     policy = −min(r·adv, clip(r, 1 − ε, 1 + ε)·adv)
//   value   = ½ (target − V)²
//   total   = policy + baseline_cost · value − entropy_cost · entropy
// Diagnostics: r, whether |r − 1| > ε (PPO's clip fraction), and the KL
// estimate (r − 1) − log r ≥ 0. Gradients are of `total`, times `scale`
// (1/N for the mean reduction, 1 for the sum).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/fast_math.h"
#include "kernels/hd.h"

namespace pronghorn::kernels {

enum class LossKind : int32_t { kImpala = 0, kPpo = 1 };

struct LossParams {
  LossKind kind = LossKind::kImpala;
  float baseline_cost = 0.5f;
  float entropy_cost = 0.01f;
  float ppo_clip = 0.2f;
  float scale = 1.0f;  // gradient scale: 1/N for mean, 1 for sum
};

// Per-sample terms, written to terms[i * kLossTerms + ...].
enum LossTerm : int32_t {
  kPolicyTerm = 0,
  kValueTerm,
  kEntropyTerm,
  kRatioTerm,
  kClippedTerm,
  kKlTerm,
  kLossTerms
};

// Inputs, row-major. Categorical: logits [N, A], actions int64 [N].
// Gaussian: mean, log_std and continuous actions [N, A] (A = dims).
// behaviour_log_probs may be null for IMPALA (then r = 1 in diagnostics).
struct LossInputs {
  int64_t N = 0, A = 0;
  const float* logits = nullptr;
  const int64_t* actions = nullptr;
  const float* mean = nullptr;
  const float* log_std = nullptr;
  const float* continuous_actions = nullptr;
  const float* behaviour_log_probs = nullptr;  // [N]
  const float* advantages = nullptr;           // [N]
  const float* values = nullptr;               // [N]
  const float* value_targets = nullptr;        // [N]
};

struct LossOutputs {
  float* grad_policy = nullptr;   // [N, A]: d total / d logits, or / d mean
  float* grad_log_std = nullptr;  // [N, A]: Gaussian only
  float* grad_values = nullptr;   // [N]
  float* terms = nullptr;         // [N, kLossTerms]
};

// The policy-gradient part shared by both heads: writes the policy term and
// diagnostics, returns g = d policy / d log π.
PRONGHORN_HD inline float policy_gradient_coefficient(const LossInputs& in, const LossParams& p,
                                                      int64_t i, float log_prob, float* terms) {
  const float adv = in.advantages[i];
  const float log_ratio =
      in.behaviour_log_probs != nullptr ? log_prob - in.behaviour_log_probs[i] : 0.0f;
  const float ratio = fast_exp(log_ratio);
  terms[kRatioTerm] = ratio;
  terms[kKlTerm] = (ratio - 1.0f) - log_ratio;
  terms[kClippedTerm] = fabsf(ratio - 1.0f) > p.ppo_clip ? 1.0f : 0.0f;
  if (p.kind == LossKind::kImpala) {
    terms[kPolicyTerm] = -adv * log_prob;
    return -adv;
  }
  const float unclipped = ratio * adv;
  const float clipped = min_f(max_f(ratio, 1.0f - p.ppo_clip), 1.0f + p.ppo_clip) * adv;
  terms[kPolicyTerm] = -min_f(unclipped, clipped);
  // The min's gradient flows only through the unclipped branch; d r / d log π = r.
  return unclipped <= clipped ? -adv * ratio : 0.0f;
}

PRONGHORN_HD inline void value_part(const LossInputs& in, const LossParams& p, int64_t i,
                                    const LossOutputs& out, float* terms) {
  const float error = in.value_targets[i] - in.values[i];
  terms[kValueTerm] = 0.5f * error * error;
  out.grad_values[i] = -p.baseline_cost * error * p.scale;
}

// One sample of a categorical policy.
PRONGHORN_HD inline void categorical_loss_sample(const LossInputs& in, const LossParams& p,
                                                 int64_t i, const LossOutputs& out) {
  const int64_t A = in.A;
  const float* logits = in.logits + i * A;
  float* grad = out.grad_policy + i * A;
  float* terms = out.terms + i * kLossTerms;
  const int64_t action = in.actions[i];
  float max = logits[0];
  for (int64_t a = 1; a < A; ++a) max = max_f(max, logits[a]);
  // `others` is Σ_{j≠a} e^{z_j − max}, so 1 − p_a = others / sum stays exact
  // when p_a rounds to 1 (large logits): 1.0f − p_a would be 0 there.
  float sum = 0.0f, others = 0.0f;
  for (int64_t a = 0; a < A; ++a) {
    const float e = fast_exp(logits[a] - max);
    sum += e;
    others += a == action ? 0.0f : e;
  }
  const float log_sum = max + fast_log(sum);
  float entropy = 0.0f;
  for (int64_t a = 0; a < A; ++a) {
    const float log_p = logits[a] - log_sum;
    entropy -= fast_exp(log_p) * log_p;
  }
  const float g = policy_gradient_coefficient(in, p, i, logits[action] - log_sum, terms);
  terms[kEntropyTerm] = entropy;
  // d log π(a)/d z_j = 1[j = a] − p_j;  d H/d z_j = −p_j (log p_j + H).
  for (int64_t a = 0; a < A; ++a) {
    const float log_p = logits[a] - log_sum;
    const float prob = fast_exp(log_p);
    const float d_log_pi = a == action ? others / sum : -prob;
    grad[a] = (g * d_log_pi + p.entropy_cost * prob * (log_p + entropy)) * p.scale;
  }
  value_part(in, p, i, out, terms);
}

// One sample of a diagonal Gaussian policy with A dims.
PRONGHORN_HD inline void gaussian_loss_sample(const LossInputs& in, const LossParams& p, int64_t i,
                                              const LossOutputs& out) {
  const int64_t A = in.A;
  const float kHalfLog2Pi = 0.91893853320467274f;  // ½ log 2π
  const float* mean = in.mean + i * A;
  const float* log_std = in.log_std + i * A;
  const float* action = in.continuous_actions + i * A;
  float* terms = out.terms + i * kLossTerms;
  float log_prob = 0.0f, entropy = 0.0f;
  for (int64_t d = 0; d < A; ++d) {
    const float z = (action[d] - mean[d]) * fast_exp(-log_std[d]);
    log_prob += -0.5f * z * z - log_std[d] - kHalfLog2Pi;
    entropy += log_std[d] + 0.5f + kHalfLog2Pi;
  }
  const float g = policy_gradient_coefficient(in, p, i, log_prob, terms);
  terms[kEntropyTerm] = entropy;
  // d log π/d μ = z/σ;  d log π/d log σ = z² − 1;  d H/d log σ = 1.
  for (int64_t d = 0; d < A; ++d) {
    const float inv_std = fast_exp(-log_std[d]);
    const float z = (action[d] - mean[d]) * inv_std;
    out.grad_policy[i * A + d] = g * z * inv_std * p.scale;
    out.grad_log_std[i * A + d] = (g * (z * z - 1.0f) - p.entropy_cost) * p.scale;
  }
  value_part(in, p, i, out, terms);
}

}  // namespace pronghorn::kernels
