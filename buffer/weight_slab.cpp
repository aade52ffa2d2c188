#include "buffer/weight_slab.h"

#include <atomic>
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

size_t slab_bytes(int64_t count) {
  return kDataOffset + 2 * sizeof(float) * static_cast<size_t>(count);
}

}  // namespace

std::unique_ptr<WeightSlab> WeightSlab::create(const std::string& name, int64_t count) {
  PRONGHORN_CHECK(count >= 1 && count <= (int64_t{1} << 32), "weight slab ", name, ": ", count,
                  " parameters: expected 1 to 2^32");
  SharedMemory memory = SharedMemory::create("weight slab " + name, name, slab_bytes(count));
  auto* shared = new (memory.base()) Shared{};
  shared->count = count;
  std::atomic_ref<uint64_t>(shared->magic).store(kMagic, std::memory_order_release);
  return std::unique_ptr<WeightSlab>(new WeightSlab(std::move(memory), count));
}

std::unique_ptr<WeightSlab> WeightSlab::attach(const std::string& name, int64_t count) {
  SharedMemory memory = SharedMemory::attach("weight slab " + name, name);
  auto bad = [&](const std::string& what) { throw Error("weight slab " + name + ": " + what); };
  if (memory.bytes() < kDataOffset) {
    bad("segment of " + std::to_string(memory.bytes()) + " bytes is no slab");
  }
  auto* shared = static_cast<Shared*>(memory.base());
  if (std::atomic_ref<uint64_t>(shared->magic).load(std::memory_order_acquire) != kMagic) {
    bad("not a Pronghorn weight slab (wrong magic)");
  }
  if (shared->count != count || memory.bytes() != slab_bytes(count)) {
    bad("holds " + std::to_string(shared->count) + " parameters, the model has " +
        std::to_string(count));
  }
  return std::unique_ptr<WeightSlab>(new WeightSlab(std::move(memory), count));
}

WeightSlab::WeightSlab(SharedMemory memory, int64_t count)
    : memory_(std::move(memory)), count_(count), shared_(static_cast<Shared*>(memory_.base())) {}

WeightSlab::~WeightSlab() = default;

float* WeightSlab::copy(uint64_t version) const {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(memory_.base()) + kDataOffset) +
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
