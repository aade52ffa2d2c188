// Env specs the model's tests build policies for, without an env: a vector
// env of 4 float observations with 3 discrete actions, or 2 bounded
// continuous ones.
#pragma once

#include "core/env_spec.h"

namespace pronghorn::testing {

inline EnvSpec vector_env(bool continuous) {
  EnvSpec env;
  env.name = "test";
  env.obs_shape = {4};
  env.action_kind = continuous ? ActionKind::kContinuous : ActionKind::kDiscrete;
  env.action_size = continuous ? 2 : 3;
  if (continuous) env.action_low = {-1.0f, -2.0f}, env.action_high = {1.0f, 2.0f};
  return env;
}

}  // namespace pronghorn::testing
