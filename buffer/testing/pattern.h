// For ring tests: fill a slot with bytes derived from (actor, seq), and check
// them, so a torn, mixed or repeated unroll is caught byte for byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "buffer/unroll_spec.h"

namespace pronghorn::buffer::testing {

// The spec every ring test uses: small, so thousands of unrolls are quick.
inline UnrollSpec test_spec() {
  UnrollSpec spec;
  spec.T = 4;
  spec.K = 8;
  spec.obs_shape = {3};
  return spec;
}

inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Words [begin, end) of the pattern; word 0 and 1 are actor and seq.
inline void fill(uint8_t* slot, size_t bytes, uint64_t actor, uint64_t seq, size_t begin,
                 size_t end) {
  const uint64_t seed = mix(actor * 1'000'003 + seq);
  for (size_t w = begin; w < end && (w + 1) * 8 <= bytes; ++w) {
    uint64_t value = w == 0 ? actor : w == 1 ? seq : mix(seed + w);
    std::memcpy(slot + w * 8, &value, 8);
  }
}

inline size_t words(size_t bytes) { return bytes / 8; }

// True when the slot holds exactly the pattern of the (actor, seq) it names.
inline bool intact(const uint8_t* slot, size_t bytes, uint64_t* actor, uint64_t* seq) {
  std::memcpy(actor, slot, 8);
  std::memcpy(seq, slot + 8, 8);
  const uint64_t seed = mix(*actor * 1'000'003 + *seq);
  for (size_t w = 2; w < words(bytes); ++w) {
    uint64_t value;
    std::memcpy(&value, slot + w * 8, 8);
    if (value != mix(seed + w)) return false;
  }
  return true;
}

}  // namespace pronghorn::buffer::testing
