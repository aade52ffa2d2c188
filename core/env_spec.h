// What an env looks like from outside (docs/architecture.md §7): its
// observation and action spaces and its time limit. Plain data, so that the
// ring's layout (buffer/), the model (model/) and the envs themselves (envs/)
// share one description without depending on each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pronghorn {

// Values match the plugin ABI's PRONGHORN_DTYPE_* (envs/pronghorn_env.h).
enum class Dtype : int32_t { kFloat32 = 0, kUInt8 = 1 };
enum class ActionKind : int32_t { kDiscrete = 0, kContinuous = 1 };

size_t dtype_bytes(Dtype dtype);

struct EnvSpec {
  std::string name;
  Dtype obs_dtype = Dtype::kFloat32;
  std::vector<int64_t> obs_shape;  // of one env's observation
  ActionKind action_kind = ActionKind::kDiscrete;
  int64_t action_size = 0;        // discrete: number of actions; continuous: dims
  std::vector<float> action_low;  // continuous: [action_size]
  std::vector<float> action_high;
  int64_t max_episode_steps = 0;  // time limit in force; 0 = none
  // The mean return that counts as solved (run.target_return = "auto");
  // 0 = none declared (a plugin's).
  double target_return = 0;

  int64_t obs_elements() const;  // product of obs_shape
  size_t obs_bytes() const;      // of one env's observation
  size_t action_bytes() const;   // of one env's action
  std::string describe() const;  // "obs float32[4], 2 discrete actions, limit 500"
};

}  // namespace pronghorn
