// FNV-1a, 64 bit: a fast checksum of bytes (checkpoints) and a short digest of
// text (the resolved config). Not cryptographic.
#pragma once

#include <cstdint>
#include <string_view>

namespace pronghorn {

inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace pronghorn
