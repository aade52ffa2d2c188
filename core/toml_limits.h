// Bounds on TOML text, checked before toml++ parses it: toml++ recurses once
// per dotted part of a key (`a.b.c… = 1` with 40,000 parts overflows the
// stack) and reads whatever size it is given. A Pronghorn config is a few
// kilobytes of `[section]` and `key = value`, so the bounds below leave room
// for any real config and stop anything else with one line saying which
// bound and where. Internal to core/config.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pronghorn {

inline constexpr size_t kMaxConfigFileBytes = size_t{1} << 20;
inline constexpr size_t kMaxOverrideBytes = size_t{64} << 10;  // one --set value
inline constexpr int kMaxKeyParts = 8;  // dotted parts of one key or [table] header
inline constexpr int kMaxNesting = 32;  // arrays and inline tables inside each other

// "" when `text` keeps within kMaxKeyParts and kMaxNesting, else what went
// past which bound, with its line ("line 2: a key of 40000 dotted parts; at
// most 8"). Text that is not TOML passes when it keeps within the bounds:
// toml++ then says what is wrong with it.
std::string check_toml_limits(std::string_view text);

}  // namespace pronghorn
