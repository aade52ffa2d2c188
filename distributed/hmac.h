// The rendezvous handshake's proofs (docs/architecture.md §2): the store has
// no authentication of its own, so each side proves it holds the job's token
// with an HMAC-SHA256 of a nonce the other side chose; the token itself never
// crosses the network. OpenSSL's libcrypto does the hashing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pronghorn::distributed {

// HMAC-SHA256 of `message` under `key`, as 64 lowercase hex digits.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

// `bytes` bytes from the system's CSPRNG, as 2·bytes hex digits.
std::string random_hex(size_t bytes);

}  // namespace pronghorn::distributed
