// The math of the policy losses, once, for one sample i of N = T·B
// (docs/architecture.md §3): the loss terms and their gradients with respect to the policy head
// (categorical logits, or Gaussian mean and log-std) and the value, in one
// pass. Called by the CPU loop (losses_cpu.cpp) and the CUDA kernel
// (losses.cu); no LibTorch here.
//
// Per sample, with log π = log-prob of the taken action under the learner's
// policy, μ = the behaviour log-prob recorded by the actor, r = exp(log π − μ):
//   IMPALA  policy = −adv · log π
//   PPO     policy = −min(r·adv, clip(r, 1 − ε, 1 + ε)·adv)
//   value   = ½ (target − V)², or with value_clip c > 0 and the values the
//             batch started with V₀ (PPO's value clipping, as CleanRL's
//             clip_vloss): ½ max((target − V)², (target − V_c)²), where
//             V_c = V₀ + clip(V − V₀, −c, c); its gradient is 0 where the
//             clipped error is the larger (V is then outside the band)
//   total   = policy + baseline_cost · value − entropy_cost · entropy
// Diagnostics: r, whether |r − 1| > ε (PPO's clip fraction), and the KL
// estimate (r − 1) − log r ≥ 0. Gradients are of `total`, times `scale`
// (1/N for the mean reduction, 1 for the sum).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/fast_math.h"
#include "core/hd.h"

namespace pronghorn::kernels {

enum class LossKind : int32_t { kImpala = 0, kPpo = 1 };

struct LossParams {
  LossKind kind = LossKind::kImpala;
  float baseline_cost = 0.5f;
  float entropy_cost = 0.01f;
  float ppo_clip = 0.2f;
  float scale = 1.0f;       // gradient scale: 1/N for mean, 1 for sum
  float value_clip = 0.0f;  // > 0 with LossInputs::old_values: value clipping
};

// Per-sample terms, written term-major: terms[term * N + i].
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
  const float* old_values = nullptr;           // [N] V₀, for value_clip; may be null
};

struct LossOutputs {
  float* grad_policy = nullptr;   // [N, A]: d total / d logits, or / d mean
  float* grad_log_std = nullptr;  // [N, A]: Gaussian only
  float* grad_values = nullptr;   // [N]
  float* terms = nullptr;         // [kLossTerms, N]
};

// The policy-gradient part of one sample, shared by both heads.
struct PolicyTerms {
  float loss;     // the policy term
  float g;        // d loss / d log π
  float ratio;    // π/μ
  float clipped;  // 1 when |π/μ − 1| > ε
  float kl;       // (r − 1) − log r
};

// log_ratio = log π − μ, or 0 without behaviour log-probs. Branch-free
// (selects only), so a loop over samples vectorises.
PRONGHORN_HD inline PolicyTerms policy_terms(const LossParams& p, float adv, float log_prob,
                                             float log_ratio) {
  const float ratio = fast_exp(log_ratio);
  const float unclipped = ratio * adv;
  const float clipped = min_f(max_f(ratio, 1.0f - p.ppo_clip), 1.0f + p.ppo_clip) * adv;
  const bool impala = p.kind == LossKind::kImpala;
  PolicyTerms t;
  t.loss = impala ? -adv * log_prob : -min_f(unclipped, clipped);
  // PPO: the min's gradient flows only through the unclipped branch; d r / d log π = r.
  t.g = impala ? -adv : (unclipped <= clipped ? -adv * ratio : 0.0f);
  t.ratio = ratio;
  t.clipped = fabsf(ratio - 1.0f) > p.ppo_clip ? 1.0f : 0.0f;
  t.kl = (ratio - 1.0f) - log_ratio;
  return t;
}

// log π − μ for sample i, or 0 when the batch has no behaviour log-probs.
PRONGHORN_HD inline float log_ratio_at(const LossInputs& in, int64_t i, float log_prob) {
  return in.behaviour_log_probs != nullptr ? log_prob - in.behaviour_log_probs[i] : 0.0f;
}

// Writes the policy, value and diagnostic terms and d total / d V of sample i.
PRONGHORN_HD inline void write_sample_terms(const LossInputs& in, const LossParams& p, int64_t i,
                                            const PolicyTerms& t, float entropy,
                                            const LossOutputs& out) {
  const int64_t n = in.N;
  const float value = in.values[i];
  float error = in.value_targets[i] - value;
  float value_loss = 0.5f * error * error;
  if (in.old_values != nullptr && p.value_clip > 0.0f) {
    // Inside the band V_c = V (in exact arithmetic: float's old + (V − old)
    // may round off V, so the band is tested, not the two losses). Outside
    // it V_c is constant in V: where its loss is the larger, the gradient is 0.
    const float old = in.old_values[i];
    const bool outside = fabsf(value - old) > p.value_clip;
    const float clipped = old + (value > old ? p.value_clip : -p.value_clip);
    const float clipped_error = in.value_targets[i] - clipped;
    const float clipped_loss = 0.5f * clipped_error * clipped_error;
    const bool clipped_wins = outside && clipped_loss > value_loss;
    error = clipped_wins ? 0.0f : error;
    value_loss = clipped_wins ? clipped_loss : value_loss;
  }
  out.terms[kPolicyTerm * n + i] = t.loss;
  out.terms[kValueTerm * n + i] = value_loss;
  out.terms[kEntropyTerm * n + i] = entropy;
  out.terms[kRatioTerm * n + i] = t.ratio;
  out.terms[kClippedTerm * n + i] = t.clipped;
  out.terms[kKlTerm * n + i] = t.kl;
  out.grad_values[i] = -p.baseline_cost * error * p.scale;
}

// d total / d z_a for one logit of a categorical sample, before `scale`:
// g·(1[a = action] − p_a) + entropy_cost·p_a·(log p_a + H), the first factor
// given as one_minus_p_action (= others / sum, exact even when p_a rounds
// to 1) for the taken action.
PRONGHORN_HD inline float categorical_logit_gradient(const LossParams& p, float g, bool is_action,
                                                     float one_minus_p_action, float prob,
                                                     float log_p, float entropy) {
  const float d_log_pi = is_action ? one_minus_p_action : -prob;
  return g * d_log_pi + p.entropy_cost * prob * (log_p + entropy);
}

// One sample of a categorical policy, the way the CUDA kernel runs it.
PRONGHORN_HD inline void categorical_loss_sample(const LossInputs& in, const LossParams& p,
                                                 int64_t i, const LossOutputs& out) {
  const int64_t A = in.A;
  const float* logits = in.logits + i * A;
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
  const float log_prob = logits[action] - log_sum;
  const PolicyTerms t = policy_terms(p, in.advantages[i], log_prob, log_ratio_at(in, i, log_prob));
  for (int64_t a = 0; a < A; ++a) {
    const float log_p = logits[a] - log_sum;
    out.grad_policy[i * A + a] = categorical_logit_gradient(p, t.g, a == action, others / sum,
                                                            fast_exp(log_p), log_p, entropy) *
                                 p.scale;
  }
  write_sample_terms(in, p, i, t, entropy, out);
}

// One sample of a diagonal Gaussian policy with A dims.
PRONGHORN_HD inline void gaussian_loss_sample(const LossInputs& in, const LossParams& p, int64_t i,
                                              const LossOutputs& out) {
  const int64_t A = in.A;
  const float kHalfLog2Pi = 0.91893853320467274f;  // ½ log 2π
  const float* mean = in.mean + i * A;
  const float* log_std = in.log_std + i * A;
  const float* action = in.continuous_actions + i * A;
  float log_prob = 0.0f, entropy = 0.0f;
  for (int64_t d = 0; d < A; ++d) {
    const float z = (action[d] - mean[d]) * fast_exp(-log_std[d]);
    log_prob += -0.5f * z * z - log_std[d] - kHalfLog2Pi;
    entropy += log_std[d] + 0.5f + kHalfLog2Pi;
  }
  const PolicyTerms t = policy_terms(p, in.advantages[i], log_prob, log_ratio_at(in, i, log_prob));
  const float g = t.g;
  // d log π/d μ = z/σ;  d log π/d log σ = z² − 1;  d H/d log σ = 1.
  for (int64_t d = 0; d < A; ++d) {
    const float inv_std = fast_exp(-log_std[d]);
    const float z = (action[d] - mean[d]) * inv_std;
    out.grad_policy[i * A + d] = g * z * inv_std * p.scale;
    out.grad_log_std[i * A + d] = (g * (z * z - 1.0f) - p.entropy_cost) * p.scale;
  }
  write_sample_terms(in, p, i, t, entropy, out);
}

}  // namespace pronghorn::kernels
