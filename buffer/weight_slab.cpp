#include "buffer/weight_slab.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "buffer/futex.h"
#include "core/error.h"

namespace pronghorn::buffer {

struct WeightSlab::Shared {
  uint64_t magic;
  int64_t count;
  alignas(64) std::atomic<uint64_t> version;
  std::atomic<uint32_t> wake;  // low bits of version, for futex waiters
};

namespace {

constexpr uint64_t kMagic = 0x50484f524e534c42ull;  // "PHORNSLB"
constexpr size_t kDataOffset = 4096;

size_t slab_bytes(int64_t count) { return kDataOffset + 2 * sizeof(float) * static_cast<size_t>(count); }

[[noreturn]] void fail_sys(const std::string& what, const std::string& name) {
  throw Error("weight slab " + name + ": " + what + ": " + std::strerror(errno));
}

}  // namespace

std::unique_ptr<WeightSlab> WeightSlab::create(const std::string& name, int64_t count) {
  PRONGHORN_CHECK(count >= 1 && count <= (int64_t{1} << 32), "weight slab ", name, ": ", count,
                  " parameters: expected 1 to 2^32");
  const size_t bytes = slab_bytes(count);
  shm_unlink(name.c_str());  // a stale slab of this run
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) fail_sys("cannot create", name);
  fchmod(fd, 0600);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    fail_sys("cannot size", name);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    close(fd);
    shm_unlink(name.c_str());
    fail_sys("cannot map", name);
  }
  auto* shared = new (base) Shared{};
  shared->count = count;
  std::atomic_ref<uint64_t>(shared->magic).store(kMagic, std::memory_order_release);
  return std::unique_ptr<WeightSlab>(new WeightSlab(name, true, fd, base, bytes, count));
}

std::unique_ptr<WeightSlab> WeightSlab::attach(const std::string& name, int64_t count) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) fail_sys("cannot attach", name);
  struct stat st {};
  fstat(fd, &st);
  const auto size = static_cast<size_t>(st.st_size);
  if (size < kDataOffset) {
    close(fd);
    throw Error("weight slab " + name + ": segment of " + std::to_string(size) +
                " bytes is no slab");
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) fail_sys("cannot map", name);
  auto* shared = static_cast<Shared*>(base);
  std::string problem;
  if (std::atomic_ref<uint64_t>(shared->magic).load(std::memory_order_acquire) != kMagic) {
    problem = "not a Pronghorn weight slab (wrong magic)";
  } else if (shared->count != count || size != slab_bytes(count)) {
    problem = "holds " + std::to_string(shared->count) + " parameters, the model has " +
              std::to_string(count);
  }
  if (!problem.empty()) {
    munmap(base, size);
    close(fd);
    throw Error("weight slab " + name + ": " + problem);
  }
  return std::unique_ptr<WeightSlab>(new WeightSlab(name, false, fd, base, size, count));
}

WeightSlab::WeightSlab(std::string name, bool owner, int fd, void* base, size_t bytes,
                       int64_t count)
    : name_(std::move(name)), owner_(owner), fd_(fd), base_(base), bytes_(bytes), count_(count),
      shared_(static_cast<Shared*>(base)) {}

WeightSlab::~WeightSlab() {
  munmap(base_, bytes_);
  close(fd_);
  if (owner_) shm_unlink(name_.c_str());
}

float* WeightSlab::copy(uint64_t version) const {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(base_) + kDataOffset) +
         (version % 2) * static_cast<size_t>(count_);
}

uint64_t WeightSlab::publish(const float* params) {
  const uint64_t next = shared_->version.load(std::memory_order_relaxed) + 1;
  std::memcpy(copy(next), params, sizeof(float) * static_cast<size_t>(count_));
  shared_->version.store(next, std::memory_order_release);
  shared_->wake.store(static_cast<uint32_t>(next), std::memory_order_release);
  futex_wake_all(&shared_->wake);
  return next;
}

void WeightSlab::set_version(uint64_t version) {
  shared_->version.store(version, std::memory_order_release);
  shared_->wake.store(static_cast<uint32_t>(version), std::memory_order_release);
}

uint64_t WeightSlab::version() const { return shared_->version.load(std::memory_order_acquire); }

uint64_t WeightSlab::read(float* out) const {
  for (;;) {
    const uint64_t v = shared_->version.load(std::memory_order_acquire);
    if (v == 0) return 0;
    std::memcpy(out, copy(v), sizeof(float) * static_cast<size_t>(count_));
    // The copy is whole if the writer has not published v + 1 since: only
    // after that may it start writing copy v % 2 again. A read-modify-write
    // with release keeps the copy's reads before this check (a plain load
    // would not; a fence would, but ThreadSanitizer cannot follow fences).
    if (shared_->version.fetch_add(0, std::memory_order_acq_rel) == v) return v;
  }
}

uint64_t WeightSlab::wait_newer(uint64_t seen, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const uint32_t wake = shared_->wake.load(std::memory_order_acquire);
    const uint64_t v = shared_->version.load(std::memory_order_acquire);
    if (v > seen) return v;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) return v;
    futex_wait(&shared_->wake, wake, left);
  }
}

}  // namespace pronghorn::buffer
