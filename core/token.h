// Bearer tokens of the control plane (docs/architecture.md §4): mutating gRPC calls
// carry `authorization: Bearer <token>`; the learner compares in constant
// time. A token lives in a file of its own, one line of text.
//
// Two kinds of token file, checked differently:
// - one handed in explicitly (server.token_file, --token-file, a mounted
//   secret): refused when other users may read or write it;
// - a run directory's `token`, which the job generates: refused unless it is
//   owned by this process's user and private (mode 0600 or stricter), so a
//   file planted by another user in a shared run directory is never adopted.
#pragma once

#include <string>
#include <string_view>

namespace pronghorn {

// 32 bytes from the kernel's random source, as 64 lowercase hex digits.
std::string generate_token();

// The token in an explicit token file: its first line without surrounding
// whitespace. Throws Error naming the file when it cannot be read, holds no
// token, or is open to other users.
std::string read_token_file(const std::string& path);

// The token in a run directory's token file `path`, with the ownership check
// above; Error naming the file otherwise.
std::string read_run_token_file(const std::string& path);

// The run directory's token in `path` when the file exists (checked as
// read_run_token_file); otherwise a new one written there whole, mode 0600,
// created exclusively (never replaces another's file).
std::string read_or_create_token_file(const std::string& path);

// Whether `given` equals `expected`, in time that depends only on their
// lengths: no early exit on the first differing byte.
bool tokens_equal(std::string_view given, std::string_view expected);

}  // namespace pronghorn
