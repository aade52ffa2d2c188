#include "core/env_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <numeric>

namespace pronghorn {

size_t dtype_bytes(Dtype dtype) { return dtype == Dtype::kFloat32 ? 4 : 1; }

int64_t EnvSpec::obs_elements() const {
  return std::accumulate(obs_shape.begin(), obs_shape.end(), int64_t{1}, std::multiplies<>());
}

size_t EnvSpec::obs_bytes() const {
  return static_cast<size_t>(obs_elements()) * dtype_bytes(obs_dtype);
}

size_t EnvSpec::action_bytes() const {
  return action_kind == ActionKind::kDiscrete ? sizeof(int32_t)
                                              : sizeof(float) * static_cast<size_t>(action_size);
}

std::string EnvSpec::describe() const {
  std::string obs = fmt::format("obs {}[{}]", obs_dtype == Dtype::kFloat32 ? "float32" : "uint8",
                                fmt::join(obs_shape, ", "));
  std::string act;
  if (action_kind == ActionKind::kDiscrete) {
    act = fmt::format("{} discrete actions", action_size);
  } else {
    std::vector<std::string> bounds;
    for (int64_t d = 0; d < action_size; ++d) {
      bounds.push_back(fmt::format("[{}, {}]", action_low[d], action_high[d]));
    }
    act =
        fmt::format("continuous actions float32[{}] in {}", action_size, fmt::join(bounds, " × "));
  }
  std::string limit = max_episode_steps > 0 ? fmt::format("time limit {}", max_episode_steps)
                                            : std::string("no time limit");
  return fmt::format("{}, {}, {}", obs, act, limit);
}

std::string public_version(const std::string& version) {
  return version.substr(0, version.find('+'));
}

std::string package_difference(const std::map<std::string, std::string>& here,
                               const std::map<std::string, std::string>& there,
                               const std::string& here_name, const std::string& there_name) {
  std::vector<std::string> differences;
  for (const auto& [name, version] : here) {
    const auto theirs = there.find(name);
    if (theirs != there.end() && public_version(version) != public_version(theirs->second)) {
      differences.push_back(
          fmt::format("{} {} {}, {} {}", name, version, here_name, theirs->second, there_name));
    }
  }
  return fmt::format("{}", fmt::join(differences, "; "));
}

}  // namespace pronghorn
