// The envs whose episode ended at a step (terminated or truncated), found
// eight at a time: episodes end rarely, and a branch per env costs as much
// as a step of a cheap env.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace pronghorn::envs {

static_assert(std::endian::native == std::endian::little, "for_each_ended reads bytes as words");

// Calls f(i) for each env i in [0, k) with terminated[i] or truncated[i] set.
template <typename F>
void for_each_ended(const uint8_t* terminated, const uint8_t* truncated, int64_t k, F&& f) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, terminated + i, 8);
    std::memcpy(&b, truncated + i, 8);
    // One iteration per ended env, not per env: the byte of the lowest set
    // bit names the env (little-endian), and the whole byte is cleared.
    for (uint64_t ended = a | b; ended != 0;) {
      const int byte = std::countr_zero(ended) / 8;
      f(i + byte);
      ended &= ~(uint64_t{0xff} << (8 * byte));
    }
  }
  for (; i < k; ++i) {
    if (terminated[i] | truncated[i]) f(i);
  }
}

}  // namespace pronghorn::envs
