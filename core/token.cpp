#include "core/token.h"

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/files.h"

namespace pronghorn {
namespace {

// The first line of `path`, trimmed.
std::string first_line_token(const std::string& path, const struct stat& st) {
  PRONGHORN_CHECK(S_ISREG(st.st_mode), "token file ", path, ": not a regular file");
  const std::string text = read_file(path);
  const std::string line = text.substr(0, text.find('\n'));
  const size_t begin = line.find_first_not_of(" \t\r");
  const size_t end = line.find_last_not_of(" \t\r");
  PRONGHORN_CHECK(begin != std::string::npos, "token file ", path,
                  ": its first line holds no token");
  return line.substr(begin, end - begin + 1);
}

struct stat stat_of(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) return st;
  // A path the user named that is not there is usage (exit 2), like a missing config.
  if (errno == ENOENT) throw UsageError("token file " + path + ": no such file");
  throw Error("token file " + path + ": cannot read it (" + std::strerror(errno) + ")");
}

}  // namespace

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
  const struct stat st = stat_of(path);
  PRONGHORN_CHECK((st.st_mode & (S_IROTH | S_IWOTH)) == 0, "token file ", path,
                  ": other users may read or write it (mode ",
                  detail::concat(std::oct, st.st_mode & 0777), "); chmod o-rw it");
  return first_line_token(path, st);
}

std::string read_run_token_file(const std::string& path) {
  const struct stat st = stat_of(path);
  PRONGHORN_CHECK(st.st_uid == geteuid(), "token file ", path, ": owned by uid ", st.st_uid,
                  ", not by this user (", geteuid(), "); it was not written by this job");
  PRONGHORN_CHECK((st.st_mode & 077) == 0, "token file ", path, ": other users may read it (mode ",
                  detail::concat(std::oct, st.st_mode & 0777), "); expected 0600");
  return first_line_token(path, st);
}

std::string read_or_create_token_file(const std::string& path) {
  std::string token = generate_token();
  if (write_file_atomically(path, token + "\n", 0600, Replace::kNo)) return token;
  return read_run_token_file(path);  // there already
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
