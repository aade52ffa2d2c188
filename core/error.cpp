#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace pronghorn::detail {

void assert_fail(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "pronghorn: internal error at %s:%d: %s %s\n", file, line, expr,
               msg.c_str());
  std::abort();
}

}  // namespace pronghorn::detail
