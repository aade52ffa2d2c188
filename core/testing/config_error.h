// For config tests: the UsageError message parse_config throws for `toml`
// (named "test.toml") and `overrides`, or "" when it throws nothing.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/testing/error_of.h"

namespace pronghorn::testing {

inline std::string config_error_of(const std::string& toml,
                                   const std::vector<std::string>& overrides = {}) {
  return error_of<UsageError>([&] { parse_config(toml, "test.toml", overrides); });
}

// Asserts that `message` is one line and holds every one of `parts`.
inline void expect_names(const std::string& message, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(message.empty()) << "expected an error";
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

}  // namespace pronghorn::testing
