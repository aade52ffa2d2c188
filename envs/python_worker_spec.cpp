#include "envs/python_worker_spec.h"

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace pronghorn::envs {
namespace {

// Bounds on what a worker's spec may ask for (a buggy env's spec must not
// make the actor map or copy absurd sizes).
constexpr int64_t kMaxObsElements = int64_t{1} << 28;
constexpr int64_t kMaxActionSize = int64_t{1} << 20;

int64_t integer(const toml::table& t, const char* key, int64_t min, int64_t max) {
  const auto v = t[key].value<int64_t>();
  PRONGHORN_CHECK(v.has_value() && *v >= min && *v <= max, "the env worker's spec: ", key,
                  " is not an integer in [", min, ", ", max, "]");
  return *v;
}

std::vector<float> floats(const toml::table& t, const char* key) {
  std::vector<float> out;
  if (const toml::array* a = t[key].as_array()) {
    for (const toml::node& n : *a) out.push_back(static_cast<float>(n.value<double>().value_or(0)));
  }
  return out;
}

}  // namespace

std::pair<EnvSpec, PythonWorker::Layout> read_worker_spec(const toml::table& s,
                                                          const std::string& name, int64_t k) {
  EnvSpec spec;
  spec.name = name;
  spec.obs_dtype =
      s["obs_dtype"].value_or(std::string()) == "uint8" ? Dtype::kUInt8 : Dtype::kFloat32;
  int64_t elements = 1;
  const toml::array* shape = s["obs_shape"].as_array();
  PRONGHORN_CHECK(shape != nullptr && !shape->empty() && shape->size() <= 4,
                  "the env worker's spec: observation rank not in [1, 4]");
  for (const toml::node& d : *shape) {
    const int64_t n = d.value<int64_t>().value_or(0);
    PRONGHORN_CHECK(n >= 1 && n <= kMaxObsElements && elements * n <= kMaxObsElements,
                    "the env worker's spec: observation shape out of range");
    elements *= n;
    spec.obs_shape.push_back(n);
  }
  spec.action_kind = s["action_kind"].value_or(std::string()) == "continuous"
                         ? ActionKind::kContinuous
                         : ActionKind::kDiscrete;
  spec.action_size = integer(s, "action_size", 1, kMaxActionSize);
  spec.action_low = floats(s, "action_low");
  spec.action_high = floats(s, "action_high");
  if (spec.action_kind == ActionKind::kContinuous) {
    const size_t dims = static_cast<size_t>(spec.action_size);
    PRONGHORN_CHECK(spec.action_low.size() == dims && spec.action_high.size() == dims,
                    "the env worker's spec: action bounds do not have ", dims, " values");
    for (size_t d = 0; d < dims; ++d) {
      PRONGHORN_CHECK(std::isfinite(spec.action_low[d]) && std::isfinite(spec.action_high[d]) &&
                          spec.action_low[d] < spec.action_high[d],
                      "the env worker's spec: action bounds of dimension ", d,
                      " are not finite and increasing");
    }
  }
  spec.max_episode_steps = integer(s, "max_episode_steps", 0, INT64_MAX);
  spec.target_return = s["target_return"].value_or(0.0);
  if (const toml::table* packages = s["packages"].as_table()) {
    for (const auto& [package, version] : *packages) {
      PRONGHORN_CHECK(version.is_string(), "the env worker's spec: the version of package ",
                      package.str(), " is not a string");
      spec.packages[std::string(package.str())] = version.as_string()->get();
    }
  }
  if (const toml::array* keys = s["episode_info"].as_array()) {
    for (const toml::node& key : *keys) {
      PRONGHORN_CHECK(key.is_string(), "the env worker's spec: episode_info holds a non-string");
      spec.episode_info.push_back(key.as_string()->get());
    }
  }
  const toml::table* l = s["layout"].as_table();
  PRONGHORN_CHECK(l != nullptr, "the env worker's spec has no layout");
  const auto offset = [&](const char* key) {
    return static_cast<size_t>(integer(*l, key, 0, int64_t{1} << 40));
  };
  const PythonWorker::Layout layout{
      offset("actions"),
      offset("obs"),
      offset("rewards"),
      offset("terminated"),
      offset("truncated"),
      offset("final_obs"),
      spec.episode_info.empty() ? 0 : offset("episode_info"),  // a field of 0 bytes otherwise
      offset("size")};
  const size_t n = static_cast<size_t>(k);
  const bool fits =
      layout.actions + spec.action_bytes() * n <= layout.size &&
      layout.obs + spec.obs_bytes() * n <= layout.size &&
      layout.rewards + sizeof(float) * n <= layout.size && layout.terminated + n <= layout.size &&
      layout.truncated + n <= layout.size &&
      layout.final_obs + spec.obs_bytes() * n <= layout.size &&
      layout.episode_info + sizeof(float) * spec.episode_info.size() * n <= layout.size;
  PRONGHORN_CHECK(fits, "the env worker's memory layout does not hold its spec");
  return {std::move(spec), layout};
}

}  // namespace pronghorn::envs
