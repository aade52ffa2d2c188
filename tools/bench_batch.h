// A random learner batch for the `pronghorn bench` subcommands that time
// Trainer::learn (bench policy, bench learner).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "core/env_spec.h"
#include "learner/batch.h"

namespace pronghorn::cli {

// On the CPU, as make_batch() gives one: T steps of N columns, random
// observations (bytes, or normal floats) and actions (discrete or
// continuous, as `spec`'s), random rewards, no episode ends; the same
// numbers every call.
inline learner::Batch random_learner_batch(const EnvSpec& spec, int64_t T, int64_t N) {
  at::manual_seed(1);
  learner::Batch b;
  std::vector<int64_t> obs_shape = {T + 1, N};
  obs_shape.insert(obs_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  b.obs = spec.obs_dtype == Dtype::kUInt8 ? at::randint(0, 256, obs_shape, at::kByte)
                                          : at::randn(obs_shape);
  b.actions = spec.action_kind == ActionKind::kContinuous
                  ? at::randn({T, N, spec.action_size})
                  : at::randint(0, spec.action_size, {T, N}, at::kLong);
  b.rewards = at::randn({T, N});
  b.discounts = at::full({T, N}, 0.99f);
  b.truncated = at::zeros({T, N}, at::kByte);
  b.final_values = at::zeros({T, N});
  b.behaviour_log_probs = at::full({T, N}, -0.69f);
  return b;
}

}  // namespace pronghorn::cli
