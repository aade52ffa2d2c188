// Shared-memory names for tests: unique to the test process, so parallel
// ctest runs never meet, and recognisably a test's ("/pronghorn-test-…").
#pragma once

#include <unistd.h>

#include <string>

namespace pronghorn::buffer::testing {

inline std::string unique_name(const std::string& what) {
  return "/pronghorn-test-" + std::to_string(getpid()) + "-" + what;
}

}  // namespace pronghorn::buffer::testing
