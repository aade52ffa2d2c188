// Errors: one mechanism, caught at the edges (STYLE.md "Errors").
//
// Code that meets bad input throws pronghorn::Error (runtime failure, exit 1
// at main) or pronghorn::UsageError (bad config or command line, exit 2), with
// a message that names the input that was wrong and what was expected.
// Broken invariants, which no input can cause, abort with file and line via
// PRONGHORN_ASSERT.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace pronghorn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad configuration or command line: main exits with status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace pronghorn

// Throws pronghorn::Error(message parts...) unless `cond` holds.
#define PRONGHORN_CHECK(cond, ...)                                         \
  do {                                                                     \
    if (!(cond)) throw ::pronghorn::Error(::pronghorn::detail::concat(__VA_ARGS__)); \
  } while (0)

// Aborts with file and line unless `cond` holds. For invariants only.
#define PRONGHORN_ASSERT(cond, ...)                                                    \
  do {                                                                                 \
    if (!(cond))                                                                       \
      ::pronghorn::detail::assert_fail(#cond, __FILE__, __LINE__,                      \
                                       ::pronghorn::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
