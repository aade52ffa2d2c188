// For tests: the message of the pronghorn::Error (or subclass E) that `f`
// throws, or "" when it throws nothing.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace pronghorn::testing {

template <typename E = Error>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace pronghorn::testing
