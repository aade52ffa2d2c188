#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace pronghorn {
namespace {

std::string reason() { return std::strerror(errno); }

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

bool write_file_atomically(const std::string& path, std::string_view content, unsigned mode,
                           Replace replace) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  PRONGHORN_CHECK(fd >= 0, path, ": cannot write it (", reason(), ")");
  fchmod(fd, mode);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  bool ok = written == content.size() && fsync(fd) == 0;
  int saved = errno;
  ok = close(fd) == 0 && ok;
  if (ok) {
    // link() fails when `path` exists: an exclusive create with its content whole.
    ok = replace == Replace::kYes ? rename(tmp.c_str(), path.c_str()) == 0
                                  : link(tmp.c_str(), path.c_str()) == 0;
    saved = errno;
  }
  if (!ok || replace == Replace::kNo) unlink(tmp.c_str());
  if (!ok && replace == Replace::kNo && saved == EEXIST) return false;
  errno = saved;
  PRONGHORN_CHECK(ok, path, ": cannot write it (", reason(), ")");
  const int dir = open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {  // the rename itself, on disk
    fsync(dir);
    close(dir);
  }
  return true;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  PRONGHORN_CHECK(in.good(), path, ": cannot read it (", reason(), ")");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace pronghorn
