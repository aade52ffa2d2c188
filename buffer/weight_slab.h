// The weight slab (docs/architecture.md §1): one shared-memory region where the learner
// publishes its flat parameter vector and actors copy it, with no lock held
// across processes.
//
// Two copies and a version word: version v lives in copy v % 2. The learner
// writes version v + 1 into the other copy, then publishes v + 1 (release).
// A reader takes v, copies copy v % 2, and keeps the copy only if the version
// is still v afterwards: until v + 1 is published the writer never touches
// copy v % 2, so a kept copy is never mixed. A reader that dies mid-copy
// leaves nothing to clean up. wait_newer() blocks on a futex with a timeout.
//
// Threads: one writer (the learner); any number of readers in any process.
// Test: buffer/weight_slab_test.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "buffer/shared_memory.h"

namespace pronghorn::buffer {

class WeightSlab {
 public:
  // Creates slab `name` for `count` float32 parameters, mode 0600, its
  // memory reserved; throws Error when `name` exists or /dev/shm lacks the
  // space (SharedMemory::create). The creator unlinks it on destruction.
  // Version 0: no weights published yet.
  static std::unique_ptr<WeightSlab> create(const std::string& name, int64_t count);
  // Throws Error unless the slab exists and holds exactly `count` parameters.
  static std::unique_ptr<WeightSlab> attach(const std::string& name, int64_t count);
  ~WeightSlab();
  WeightSlab(const WeightSlab&) = delete;
  WeightSlab& operator=(const WeightSlab&) = delete;

  int64_t count() const { return count_; }

  // Writer: publishes `params` [count] as the next version; returns it.
  uint64_t publish(const float* params);
  // Writer, after a resume: the next publish() will be version + 1.
  void set_version(uint64_t version);

  // The version now published (0: none yet).
  uint64_t version() const;

  // Reader: copies the newest version into `out` [count]; returns its version
  // (0 and nothing copied when none is published). Retries while the writer
  // overtakes it.
  uint64_t read(float* out) const;

  // Reader: waits until a version newer than `seen` is published, at most
  // `timeout`; returns the version then published.
  uint64_t wait_newer(uint64_t seen, std::chrono::milliseconds timeout) const;

  struct Shared;  // the segment's header (weight_slab.cpp)

 private:
  WeightSlab(SharedMemory memory, int64_t count);
  float* copy(uint64_t version) const;

  SharedMemory memory_;
  int64_t count_;
  Shared* shared_;
};

}  // namespace pronghorn::buffer
