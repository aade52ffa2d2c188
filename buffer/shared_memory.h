// A named POSIX shared-memory segment mapped into this process: the common
// part of the ring and the weight slab. Errors throw pronghorn::Error naming
// `what` (e.g. "ring /pronghorn-run-ring") and the system's reason.
#pragma once

#include <cstddef>
#include <string>

namespace pronghorn::buffer {

class SharedMemory {
 public:
  // Creates `name` with `bytes` zero bytes, mode 0600, replacing a stale
  // segment of the same name. The creator unlinks it on destruction.
  static SharedMemory create(const std::string& what, const std::string& name, size_t bytes);
  // Maps the existing segment `name` whole.
  static SharedMemory attach(const std::string& what, const std::string& name);

  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&&) = delete;
  ~SharedMemory();

  void* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  SharedMemory(std::string name, bool owner, int fd, void* base, size_t bytes);

  std::string name_;
  bool owner_ = false;
  int fd_ = -1;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace pronghorn::buffer
