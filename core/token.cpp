#include "core/token.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace pronghorn {

std::string generate_token() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    PRONGHORN_CHECK(n > 0 || errno == EINTR, "getrandom: ", std::strerror(errno));
    if (n > 0) got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  PRONGHORN_CHECK(in.good(), "token file ", path, ": cannot read it (", std::strerror(errno), ")");
  std::string line;
  std::getline(in, line);
  const size_t begin = line.find_first_not_of(" \t\r");
  const size_t end = line.find_last_not_of(" \t\r");
  PRONGHORN_CHECK(begin != std::string::npos, "token file ", path,
                  ": its first line holds no token");
  return line.substr(begin, end - begin + 1);
}

std::string read_or_create_token_file(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    PRONGHORN_CHECK(errno == EEXIST, "token file ", path, ": cannot create it (",
                    std::strerror(errno), ")");
    return read_token_file(path);
  }
  const std::string token = generate_token();
  const std::string text = token + "\n";
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  close(fd);
  PRONGHORN_CHECK(written, "token file ", path, ": cannot write it (", std::strerror(saved), ")");
  return token;
}

bool tokens_equal(std::string_view given, std::string_view expected) {
  // Walk all of `expected` whatever `given` holds, so the time taken tells
  // nothing about how long a prefix matched.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0 && !expected.empty();
}

}  // namespace pronghorn
