// Bearer tokens of the control plane (DESIGN.md §4): mutating gRPC calls
// carry `authorization: Bearer <token>`; the learner compares in constant
// time. A token lives in a file of its own (mode 0600), one line of text.
#pragma once

#include <string>
#include <string_view>

namespace pronghorn {

// 32 bytes from the kernel's random source, as 64 lowercase hex digits.
std::string generate_token();

// The token in `path`: its first line without surrounding whitespace. Throws
// Error naming the file when it cannot be read or holds no token.
std::string read_token_file(const std::string& path);

// The token in `path` when the file exists; otherwise a new one written there
// with mode 0600 (created exclusively: never replaces another's file).
std::string read_or_create_token_file(const std::string& path);

// Whether `given` equals `expected`, in time that depends only on their
// lengths: no early exit on the first differing byte.
bool tokens_equal(std::string_view given, std::string_view expected);

}  // namespace pronghorn
