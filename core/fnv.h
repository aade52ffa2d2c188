// FNV-1a, 64 bit: a fast checksum of bytes (checkpoints), a short digest of
// text (the resolved config) and of an unroll's shape (the ring's spec
// hash). Not cryptographic.
#pragma once

#include <cstdint>
#include <string_view>

namespace pronghorn {

inline constexpr uint64_t kFnv1aStart = 0xcbf29ce484222325ull;

// `h` extended by `bytes`: hashes built piece by piece start at kFnv1aStart.
inline uint64_t fnv1a(uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

inline uint64_t fnv1a(std::string_view bytes) { return fnv1a(kFnv1aStart, bytes); }

}  // namespace pronghorn
