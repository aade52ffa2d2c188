// Caller-owned buffers for K envs of one spec, for tests and benchmarks.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "envs/env.h"

namespace pronghorn::envs {

struct Buffers {
  Buffers(const EnvSpec& spec, int64_t k)
      : obs(spec.obs_bytes() * k),
        final_obs(spec.obs_bytes() * k),
        rewards(k),
        terminated(k),
        truncated(k) {}

  StepOutput out(bool with_final_obs = true) {
    return {obs.data(), rewards.data(), terminated.data(), truncated.data(),
            with_final_obs ? final_obs.data() : nullptr};
  }
  template <typename T>
  const T* obs_as() const {
    return reinterpret_cast<const T*>(obs.data());
  }
  template <typename T>
  const T* final_obs_as() const {
    return reinterpret_cast<const T*>(final_obs.data());
  }

  std::vector<uint8_t> obs;        // [K, obs...] as bytes
  std::vector<uint8_t> final_obs;  // [K, obs...] as bytes
  std::vector<float> rewards;
  std::vector<uint8_t> terminated;
  std::vector<uint8_t> truncated;
};

}  // namespace pronghorn::envs
