// For config tests: the UsageError message parse_config throws for `toml`
// (named "test.toml") and `overrides`, or "" when it throws nothing.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/testing/error_of.h"

namespace pronghorn::testing {

inline std::string config_error_of(const std::string& toml,
                                   const std::vector<std::string>& overrides = {}) {
  return error_of<UsageError>([&] { parse_config(toml, "test.toml", overrides); });
}

}  // namespace pronghorn::testing
