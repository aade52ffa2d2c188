// Per-env random numbers: every env instance owns a generator, seeded from
// (seed, env index), so K envs need no lock (glibc rand() takes one) and the
// same seed gives the same trajectories on any thread.
#pragma once

#include <cstdint>

namespace pronghorn::envs {

// SplitMix64: tiny, fast, passes BigCrush; good enough for env noise.
class Rng {
 public:
  Rng() = default;
  Rng(uint64_t seed, uint64_t stream) : state_(seed ^ (stream * 0xD1B54A32D192ED03ull)) { next(); }

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [low, high), 53 random bits.
  double uniform(double low, double high) {
    return low + (high - low) * static_cast<double>(next() >> 11) * 0x1.0p-53;
  }

  // Uniform integer in [0, n).
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>(((next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

 private:
  uint64_t state_ = 0;
};

}  // namespace pronghorn::envs
