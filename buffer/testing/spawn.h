// For buffer tests: start buffer_helper as a real process and reap it.
#pragma once

#include <string>
#include <vector>

#include "core/testing/spawn.h"

namespace pronghorn::buffer::testing {

using pronghorn::testing::wait_exit;

inline pid_t spawn_helper(const std::vector<std::string>& args) {
  return pronghorn::testing::spawn(BUFFER_HELPER, args);
}

}  // namespace pronghorn::buffer::testing
