#include "buffer/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "core/error.h"

namespace pronghorn::buffer {
namespace {

[[noreturn]] void fail_sys(const std::string& what, const std::string& step) {
  throw Error(what + ": " + step + ": " + std::strerror(errno));
}

// Bytes an unprivileged process may still allocate in /dev/shm; 0 when unknown.
uint64_t shm_free_bytes() {
  struct statvfs fs {};
  if (statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// Gives /dev/shm's pages to `fd` now; the error number (posix_fallocate sets
// no errno), 0 on success.
int reserve(int fd, size_t bytes) {
  int err;
  do {
    err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (err == EINTR);
  return err;
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

SharedMemory SharedMemory::create(const std::string& what, const std::string& name, size_t bytes) {
  // No unlink first: names are unique to their creating process
  // (segment_names.h), so one that exists is someone else's.
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    throw Error(what + ": cannot create: a segment of this name exists already");
  }
  if (fd < 0) fail_sys(what, "cannot create");
  fchmod(fd, 0600);  // whatever the umask
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int saved = errno;
    close(fd);
    shm_unlink(name.c_str());
    errno = saved;
    fail_sys(what, "cannot size to " + std::to_string(bytes) + " bytes");
  }
  if (const int err = reserve(fd, bytes); err != 0) {
    close(fd);
    shm_unlink(name.c_str());  // before measuring: its partial reservation is free again
    if (err == ENOSPC) {
      throw Error(what + ": needs " + format_bytes(bytes) + " in /dev/shm, " +
                  format_bytes(shm_free_bytes()) + " free");
    }
    errno = err;
    fail_sys(what, "cannot reserve " + format_bytes(bytes) + " in /dev/shm");
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int saved = errno;
    close(fd);
    shm_unlink(name.c_str());
    errno = saved;
    fail_sys(what, "cannot map");
  }
  return SharedMemory(name, /*owner=*/true, fd, base, bytes);
}

SharedMemory SharedMemory::attach(const std::string& what, const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) fail_sys(what, "cannot attach");
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    throw Error(what + ": empty segment");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int saved = errno;
    close(fd);
    errno = saved;
    fail_sys(what, "cannot map");
  }
  return SharedMemory(name, /*owner=*/false, fd, base, bytes);
}

SharedMemory::SharedMemory(std::string name, bool owner, int fd, void* base, size_t bytes)
    : name_(std::move(name)), owner_(owner), fd_(fd), base_(base), bytes_(bytes) {}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : name_(std::move(other.name_)),
      owner_(other.owner_),
      fd_(other.fd_),
      base_(other.base_),
      bytes_(other.bytes_) {
  other.owner_ = false;
  other.fd_ = -1;
  other.base_ = nullptr;
}

SharedMemory::~SharedMemory() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
  if (owner_) shm_unlink(name_.c_str());
}

}  // namespace pronghorn::buffer
