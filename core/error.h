// Errors: one mechanism, caught at the edges (docs/architecture.md §2).
//
// Code that meets bad input throws one of the errors below, with a message
// that names the input that was wrong and what was expected; main turns it
// into one line on stderr and the exit code docs/exit-codes.md documents:
//   0  finished or stopped
//   1  Error: a failure a retry will not fix (actors keep crashing, NaN,
//      corrupt state)
//   2  UsageError: usage, config, a refusal, a mismatch
//   75 TransientError: a lost peer, a collective deadline; resume with
//      `--resume` (75 is EX_TEMPFAIL of sysexits.h, which schedulers read as
//      "try again")
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

// Something outside this process failed and may not fail again (a peer
// lost, a deadline passed): main exits with status 75.
class TransientError : public Error {
 public:
  using Error::Error;
};

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitTransient = 75;

// The exit status an error ends the program with.
inline int exit_code_of(const std::exception& e) {
  if (dynamic_cast<const UsageError*>(&e) != nullptr) return kExitUsage;
  if (dynamic_cast<const TransientError*>(&e) != nullptr) return kExitTransient;
  return kExitFailure;
}

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
#define PRONGHORN_CHECK(cond, ...)                                                   \
  do {                                                                               \
    if (!(cond)) throw ::pronghorn::Error(::pronghorn::detail::concat(__VA_ARGS__)); \
  } while (0)

// Aborts with file and line unless `cond` holds. For invariants only.
#define PRONGHORN_ASSERT(cond, ...)                                                               \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::pronghorn::detail::assert_fail(                                                           \
          #cond, __FILE__, __LINE__, ::pronghorn::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
