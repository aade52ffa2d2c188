// A buffer handed to plugin code (envs/pronghorn_env.h), with guard bytes of
// a known pattern on both sides: after the call, intact() says whether the
// plugin wrote past either end. Plugins write into these, never straight into
// the caller's buffers (a ring slot), so a bad write is caught before any of
// it reaches training data. The guards sit inside one allocation, so the
// overrun itself harms nothing (and sanitizers stay quiet about it).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace pronghorn::envs {

class GuardedBuffer {
 public:
  // 64 bytes a side: an off-by-one row of a small observation lands in it.
  static constexpr size_t kGuardBytes = 64;
  static constexpr uint8_t kPattern = 0xA5;

  explicit GuardedBuffer(size_t size) : size_(size), bytes_(size + 2 * kGuardBytes, kPattern) {}

  // Aligned as operator new aligns (16), since kGuardBytes is a multiple of it.
  void* data() { return bytes_.data() + kGuardBytes; }
  const void* data() const { return bytes_.data() + kGuardBytes; }
  size_t size() const { return size_; }

  bool front_intact() const { return is_pattern(bytes_.data()); }
  bool back_intact() const { return is_pattern(bytes_.data() + kGuardBytes + size_); }

 private:
  static bool is_pattern(const uint8_t* guard) {
    static constexpr auto pattern = [] {
      std::array<uint8_t, kGuardBytes> bytes{};
      bytes.fill(kPattern);
      return bytes;
    }();
    return std::memcmp(guard, pattern.data(), kGuardBytes) == 0;
  }

  size_t size_;
  std::vector<uint8_t> bytes_;  // [guard | size_ bytes | guard]
};

}  // namespace pronghorn::envs
