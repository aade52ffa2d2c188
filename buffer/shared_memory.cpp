#include "buffer/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace pronghorn::buffer {
namespace {

[[noreturn]] void fail_sys(const std::string& what, const std::string& step) {
  throw Error(what + ": " + step + ": " + std::strerror(errno));
}

}  // namespace

SharedMemory SharedMemory::create(const std::string& what, const std::string& name,
                                  size_t bytes) {
  shm_unlink(name.c_str());  // a stale segment of this run, left by a process that died
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail_sys(what, "cannot create");
  fchmod(fd, 0600);  // whatever the umask
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int saved = errno;
    close(fd);
    shm_unlink(name.c_str());
    errno = saved;
    fail_sys(what, "cannot size to " + std::to_string(bytes) + " bytes");
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
    : name_(std::move(other.name_)), owner_(other.owner_), fd_(other.fd_), base_(other.base_),
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
