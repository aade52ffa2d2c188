// An exception as one line for a reader (a resume's skipped checkpoint, a
// failed run's last metrics line): its first line, trailing spaces cut,
// without LibTorch's backtrace.
#pragma once

#include <exception>
#include <string>

namespace pronghorn::learner {

std::string first_line(const std::string& text);

// "failed with no message" when there is none.
std::string reason_of(const std::exception& e);

}  // namespace pronghorn::learner
