// What an env looks like from outside (docs/architecture.md §7): its
// observation and action spaces and its time limit. Plain data, so that the
// ring's layout (buffer/), the model (model/) and the envs themselves (envs/)
// share one description without depending on each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
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
  // The numbers the env reports at each episode's end, by name
  // (env.episode_info: keys of a Python env's info); none for the others.
  std::vector<std::string> episode_info;
  // A Python env's start check: the versions of the distributions it loaded
  // and Python's ("python" → "3.11"), by name; what another node or rank
  // must have the same of. Empty for the others.
  std::map<std::string, std::string> packages;

  int64_t obs_elements() const;  // product of obs_shape
  size_t obs_bytes() const;      // of one env's observation
  size_t action_bytes() const;   // of one env's action
  std::string describe() const;  // "obs float32[4], 2 discrete actions, limit 500"
};

// How the packages both places' envs loaded differ in version, each named
// ("gymnasium 1.3.0 on this node, 1.4.0 at the learner; …"); "" when none
// does. A package only one side loaded is no difference: the same env may
// take another path on another machine (MuJoCo's EGL where there is no
// display). Versions are compared without their local label ("+cpu").
std::string package_difference(const std::map<std::string, std::string>& here,
                               const std::map<std::string, std::string>& there,
                               const std::string& here_name, const std::string& there_name);
// `version` without its local label: "2.5.0+cu121" → "2.5.0".
std::string public_version(const std::string& version);

}  // namespace pronghorn
