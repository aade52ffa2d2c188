// The math of V-trace and GAE(λ), once, for one column b of [T, B] inputs
// (docs/architecture.md §3). Called by the CPU loop (vtrace_cpu.cpp) and the CUDA
// kernel (vtrace.cu); no LibTorch here, raw row-major pointers only.
//
// With ρ_t = min(ρ̄, π/μ), c_t = min(c̄, π/μ), γ_t = discount (already
// γ·(1 − terminated_t)), and the value after step t
//   next_t = final_values[t]  where truncated[t] (a time limit cut the
//                             episode: bootstrap from its final observation),
//          = V(x_{t+1})       otherwise (bootstrap_values[b] after the last t),
// one reverse scan computes
//   vs_t  = V_t + ρ_t δ_t + γ_t c_t (vs_{t+1} − next_t)·[not truncated_t],
//   δ_t   = r_t + γ_t next_t − V_t,
//   pg_t  = min(ρ̄_pg, π/μ) (r_t + γ_t q_t − V_t),  q_t = final_values[t] where
//           truncated, vs_{t+1} otherwise (bootstrap_values[b] after the last t).
// GAE(λ) with the same clipped weights: A_t = ρ_t δ_t + γ_t λ c_t A_{t+1}
// (the trace again cut where truncated), returns_t = V_t + A_t; on-policy
// (π = μ, ρ = c = 1) it is the usual GAE.
// log(π/μ) is either given ([T, B] log_rhos) or fused in: log-softmax of the
// target logits [T, B, A] at the taken action, minus the behaviour log-prob.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/fast_math.h"
#include "core/hd.h"

namespace pronghorn::kernels {

struct VtraceParams {
  float rho_bar = 1.0f;     // ρ̄: clips ρ in the value targets
  float c_bar = 1.0f;       // c̄: clips the traces
  float rho_pg_bar = 1.0f;  // clips ρ in the policy-gradient advantage
  float lambda = 1.0f;      // GAE only
};

// Inputs, row-major, [T, B] unless noted. Exactly one of target_logits and
// log_rhos is set. truncated and final_values are both set or both null (no
// time limits in the batch).
struct AdvantageInputs {
  int64_t T = 0, B = 0, A = 0;
  const float* target_logits = nullptr;        // [T, B, A]
  const int64_t* actions = nullptr;            // with target_logits
  const float* behaviour_log_probs = nullptr;  // with target_logits
  const float* log_rhos = nullptr;             // instead of the three above
  const float* discounts = nullptr;            // γ·(1 − terminated)
  const float* rewards = nullptr;
  const float* values = nullptr;            // V(x_t) under the learner's model
  const float* bootstrap_values = nullptr;  // [B]: V(x_T)
  const float* truncated = nullptr;         // 1 where a time limit cut the episode, else 0
  const float* final_values = nullptr;      // used where truncated
};

// Outputs [T, B]. V-trace: first = vs, second = pg advantages.
// GAE: first = returns (value targets), second = advantages.
struct AdvantageOutputs {
  float* first = nullptr;
  float* second = nullptr;
  float* clipped_rhos = nullptr;  // ρ_t = min(ρ̄, π/μ)
};

// log π(action) = z_action − max − ln Σ_a e^(z_a − max): the last step of a
// max-shifted log-softmax, shared by the row-at-once and the column-at-once
// loops.
PRONGHORN_HD inline float log_softmax_finish(float action_logit, float max, float sum_exp) {
  return action_logit - max - fast_log(sum_exp);
}

// log π(action) for one row of A logits.
PRONGHORN_HD inline float log_softmax_at(const float* logits, int64_t A, int64_t action) {
  float max = logits[0];
  for (int64_t a = 1; a < A; ++a) max = max_f(max, logits[a]);
  float sum = 0.0f;
  for (int64_t a = 0; a < A; ++a) sum += fast_exp(logits[a] - max);
  return log_softmax_finish(logits[action], max, sum);
}

PRONGHORN_HD inline float log_rho_at(const AdvantageInputs& in, int64_t i) {
  if (in.log_rhos != nullptr) return in.log_rhos[i];
  return log_softmax_at(in.target_logits + i * in.A, in.A, in.actions[i]) -
         in.behaviour_log_probs[i];
}

// What one column carries from step t + 1 to step t of the reverse scan.
struct ScanCarry {
  float next_value;  // V(x_{t+1}) (bootstrap_values[b] after the last step)
  float next_vs;     // vs_{t+1}, likewise
  float carry;       // V-trace: vs_{t+1} − V(x_{t+1}); GAE: A_{t+1}
};

PRONGHORN_HD inline ScanCarry scan_start(const AdvantageInputs& in, int64_t b) {
  return {in.bootstrap_values[b], in.bootstrap_values[b], 0.0f};
}

// truncated[i] and final_values[i], or 0 and 0 when the batch has none.
PRONGHORN_HD inline float truncated_at(const AdvantageInputs& in, int64_t i) {
  return in.truncated != nullptr ? in.truncated[i] : 0.0f;
}
PRONGHORN_HD inline float final_value_at(const AdvantageInputs& in, int64_t i) {
  return in.final_values != nullptr ? in.final_values[i] : 0.0f;
}

// Step t of column b (element i = t·B + b) of V-trace (gae = false) or
// GAE(λ) (gae = true), given log(π/μ) there, and `cut` (1 where a time limit
// cut the episode, else 0) with the final observation's value; see above.
PRONGHORN_HD inline void scan_step(const AdvantageInputs& in, const VtraceParams& p, bool gae,
                                   int64_t i, float log_rho, float cut, float final_value,
                                   ScanCarry& c, const AdvantageOutputs& out) {
  const float ratio = fast_exp(log_rho);
  const float rho = min_f(p.rho_bar, ratio);
  const float trace_c = min_f(p.c_bar, ratio);
  // Where cut = 1 the next value is the final observation's and the trace
  // stops. Blends rather than selects, which vectorise more reliably.
  const float gamma = in.discounts[i];
  const float value = in.values[i];
  const float next = cut * final_value + (1.0f - cut) * c.next_value;
  const float delta = in.rewards[i] + gamma * next - value;
  const float trace = (1.0f - cut) * gamma * trace_c * (gae ? p.lambda : 1.0f);
  c.carry = rho * delta + trace * c.carry;
  if (gae) {
    out.first[i] = value + c.carry;
    out.second[i] = c.carry;
  } else {
    const float vs = value + c.carry;
    const float q = cut * final_value + (1.0f - cut) * c.next_vs;
    out.first[i] = vs;
    out.second[i] = min_f(p.rho_pg_bar, ratio) * (in.rewards[i] + gamma * q - value);
    c.next_vs = vs;
  }
  out.clipped_rhos[i] = rho;
  c.next_value = value;
}

// One whole column, the way the CUDA kernel runs it (one thread a column).
PRONGHORN_HD inline void advantage_column(const AdvantageInputs& in, const VtraceParams& p,
                                          bool gae, int64_t b, const AdvantageOutputs& out) {
  ScanCarry c = scan_start(in, b);
  for (int64_t t = in.T - 1; t >= 0; --t) {
    const int64_t i = t * in.B + b;
    scan_step(in, p, gae, i, log_rho_at(in, i), truncated_at(in, i), final_value_at(in, i), c, out);
  }
}

}  // namespace pronghorn::kernels
