// Finding a NaN or an inf in what an env wrote, cheaply enough to run after
// every step: one pass that vectorises (exponent bits all ones means NaN or
// inf), and a slow pass only to name the first bad element.
#pragma once

#include <cstdint>
#include <cstring>

namespace pronghorn::envs {

// True when every one of x[0, n) is finite.
inline bool all_finite(const float* x, int64_t n) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  return bad == 0;
}

// Index of the first NaN or inf in x[0, n), or -1.
inline int64_t first_non_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!all_finite(x + i, 1)) return i;
  }
  return -1;
}

}  // namespace pronghorn::envs
