#include "distributed/hmac.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "core/error.h"

namespace pronghorn::distributed {
namespace {

std::string hex(const unsigned char* data, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) out += fmt::format("{:02x}", data[i]);
  return out;
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  const unsigned char* ok =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  PRONGHORN_CHECK(ok != nullptr, "HMAC-SHA256 failed (OpenSSL)");
  return hex(digest, length);
}

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> data(bytes);
  PRONGHORN_CHECK(RAND_bytes(data.data(), static_cast<int>(bytes)) == 1,
                  "no random bytes from OpenSSL's generator");
  return hex(data.data(), bytes);
}

}  // namespace pronghorn::distributed
