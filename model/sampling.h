// From observations to actions with a policy: one place for the actor, which
// records what it sampled into the ring, and for `pronghorn eval`.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "core/env_spec.h"
#include "model/policy.h"

namespace pronghorn {

// `rows` observations of `spec` at `data` as a tensor [rows, obs...] of the
// env's dtype, viewing the memory in place (no copy).
at::Tensor observation_tensor(const void* data, const EnvSpec& spec, int64_t rows);

// Where sample_actions() writes, one row per observation (N rows).
struct ActionsOut {
  int32_t* discrete = nullptr;  // [N] (discrete envs)
  float* continuous = nullptr;  // [N, D] the sample itself, unclipped (continuous envs)
  float* clipped = nullptr;     // [N, D] the sample clipped to the env's bounds: what the env steps
  float* log_probs = nullptr;   // [N] log-prob of the sample (optional); the learner recomputes it
};

// Samples one action per row of `out` (greedy: the most likely action, or
// the Gaussian's mean).
void sample_actions(const PolicyOutput& out, const EnvSpec& spec, bool greedy,
                    const ActionsOut& into);

}  // namespace pronghorn
