#include "learner/error_line.h"

#include <c10/util/Exception.h>

namespace pronghorn::learner {

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::string reason_of(const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  const std::string what =
      first_line(torch_error ? torch_error->what_without_backtrace() : e.what());
  return what.empty() ? "failed with no message" : what;
}

}  // namespace pronghorn::learner
