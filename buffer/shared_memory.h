// A named POSIX shared-memory segment mapped into this process: the common
// part of the ring and the weight slab. Errors throw pronghorn::Error naming
// `what` (e.g. "ring /pronghorn.4121.8823190.ring.run") and the system's
// reason. Names: buffer/segment_names.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pronghorn::buffer {

class SharedMemory {
 public:
  // Creates `name` with `bytes` zero bytes, mode 0600, its memory reserved
  // in /dev/shm now (posix_fallocate), so that a full /dev/shm is this one
  // error at start and never a SIGBUS later. Throws Error when `name` exists
  // already (it is left alone) or when /dev/shm lacks the space: "<what>:
  // needs 3.2 MiB in /dev/shm, 0.4 MiB free"; nothing is left behind on
  // failure. The creator unlinks it on destruction.
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

// `bytes` for people: "512 B", "316.0 KiB", "3.2 MiB", "1.5 GiB".
std::string format_bytes(uint64_t bytes);

}  // namespace pronghorn::buffer
