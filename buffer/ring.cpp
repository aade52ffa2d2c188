#include "buffer/ring.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <limits>

#include "buffer/futex.h"
#include "buffer/process.h"
#include "core/error.h"

namespace pronghorn::buffer {
namespace {

constexpr uint64_t kMagic = 0x50484f524e52494eull;  // "PHORNRIN"
constexpr uint32_t kLayoutVersion = 2;
constexpr size_t kPage = 4096;
constexpr auto kReclaimEvery = std::chrono::milliseconds(100);

enum State : uint64_t { kFree = 0, kWriting = 1, kReady = 2, kReading = 3 };

uint64_t state_of(uint64_t word) { return word & 0xff; }
int pid_of(uint64_t word) { return static_cast<int>(word >> 32); }
uint64_t writing_word(uint64_t pid) { return kWriting | (pid << 32); }

struct alignas(64) SlotHeader {
  std::atomic<uint64_t> state;        // State | writer pid << 32
  std::atomic<uint64_t> owner_start;  // the writer's start time; 0 until it sets it
  uint64_t commit_seq;                // global commit order, for oldest-first
  uint64_t commit_ns;
  SlotStamp stamp;
};

// Shared between processes of the same build: its size is part of the layout.
static_assert(sizeof(SlotHeader) == 64);
static_assert(sizeof(SlotStamp) == 32);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

// The segment: this header, then SlotHeader[slots], then the slots' data.
struct Ring::Shared {
  uint64_t magic;
  uint32_t layout_version;
  uint32_t slots;
  uint64_t spec_hash;
  uint64_t slot_bytes;
  uint64_t data_offset;
  alignas(64) std::atomic<uint32_t> free_seq;   // bumped when a slot becomes FREE
  alignas(64) std::atomic<uint32_t> ready_seq;  // bumped when a slot becomes READY
  alignas(64) std::atomic<uint64_t> next_commit;
  std::atomic<uint64_t> committed, consumed, dropped_stale, reclaimed, abandoned;

  SlotHeader* slot(uint32_t i) {
    return reinterpret_cast<SlotHeader*>(reinterpret_cast<uint8_t*>(this) +
                                         align64(sizeof(Shared))) +
           i;
  }
  static size_t align64(size_t n) { return (n + 63) / 64 * 64; }
};

namespace {

size_t segment_bytes(uint32_t slots, size_t slot_bytes, size_t* data_offset) {
  size_t headers = Ring::Shared::align64(sizeof(Ring::Shared)) + sizeof(SlotHeader) * slots;
  *data_offset = (headers + kPage - 1) / kPage * kPage;
  return *data_offset + slot_bytes * slots;
}

}  // namespace

std::unique_ptr<Ring> Ring::create(const std::string& name, const UnrollSpec& spec,
                                   uint32_t slots) {
  PRONGHORN_CHECK(slots >= 1 && slots <= 65536, "ring ", name, ": ", slots,
                  " slots: expected 1 to 65536");
  SlotLayout layout = slot_layout(spec);
  size_t data_offset = 0;
  const size_t bytes = segment_bytes(slots, layout.bytes, &data_offset);
  SharedMemory memory = SharedMemory::create("ring " + name, name, bytes);
  // The segment starts zeroed: every counter and slot state at 0 (FREE).
  auto* shared = new (memory.base()) Shared{};
  shared->layout_version = kLayoutVersion;
  shared->slots = slots;
  shared->spec_hash = spec_hash(spec);
  shared->slot_bytes = layout.bytes;
  shared->data_offset = data_offset;
  for (uint32_t i = 0; i < slots; ++i) new (shared->slot(i)) SlotHeader{};
  std::atomic_ref<uint64_t>(shared->magic).store(kMagic, std::memory_order_release);
  return std::unique_ptr<Ring>(new Ring(name, std::move(memory), layout));
}

std::unique_ptr<Ring> Ring::attach(const std::string& name, const UnrollSpec& spec) {
  SlotLayout layout = slot_layout(spec);
  SharedMemory memory = SharedMemory::attach("ring " + name, name);
  auto bad = [&](const std::string& what) { throw Error("ring " + name + ": " + what); };
  if (memory.bytes() < sizeof(Shared)) {
    bad("segment of " + std::to_string(memory.bytes()) + " bytes is no ring");
  }
  auto* shared = static_cast<Shared*>(memory.base());
  if (std::atomic_ref<uint64_t>(shared->magic).load(std::memory_order_acquire) != kMagic) {
    bad("not a Pronghorn ring (wrong magic)");
  }
  if (shared->layout_version != kLayoutVersion) {
    bad("layout version " + std::to_string(shared->layout_version) + ", this Pronghorn speaks " +
        std::to_string(kLayoutVersion));
  }
  if (shared->spec_hash != spec_hash(spec) || shared->slot_bytes != layout.bytes) {
    bad("made for another unroll spec (T, K, observation or action shape differ)");
  }
  size_t data_offset = 0;
  if (segment_bytes(shared->slots, layout.bytes, &data_offset) != memory.bytes()) {
    bad("segment size does not match its header");
  }
  return std::unique_ptr<Ring>(new Ring(name, std::move(memory), layout));
}

Ring::Ring(std::string name, SharedMemory memory, SlotLayout layout)
    : name_(std::move(name)),
      memory_(std::move(memory)),
      layout_(layout),
      shared_(static_cast<Shared*>(memory_.base())),
      pid_(static_cast<uint64_t>(getpid())),
      start_time_(process_start_time(getpid())) {}

Ring::~Ring() = default;

uint32_t Ring::slots() const { return shared_->slots; }

uint8_t* Ring::slot_data(uint32_t index) {
  PRONGHORN_ASSERT(index < shared_->slots);
  return static_cast<uint8_t*>(memory_.base()) + shared_->data_offset + shared_->slot_bytes * index;
}

std::optional<uint32_t> Ring::claim(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const uint32_t n = shared_->slots;
  for (;;) {
    const uint32_t seen = shared_->free_seq.load(std::memory_order_acquire);
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t i = (hint_.load(std::memory_order_relaxed) + k) % n;
      SlotHeader* h = shared_->slot(i);
      uint64_t expected = kFree;
      if (h->state.compare_exchange_strong(expected, writing_word(pid_),
                                           std::memory_order_acq_rel)) {
        h->owner_start.store(start_time_, std::memory_order_release);
        hint_.store(i + 1, std::memory_order_relaxed);
        return i;
      }
    }
    if (reclaim_dead_writers() > 0) continue;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) return std::nullopt;
    futex_wait(&shared_->free_seq, seen, std::min<std::chrono::nanoseconds>(left, kReclaimEvery));
  }
}

void Ring::commit(uint32_t index, const SlotStamp& stamp) {
  SlotHeader* h = shared_->slot(index);
  h->stamp = stamp;
  h->commit_ns = monotonic_ns();
  h->commit_seq = shared_->next_commit.fetch_add(1, std::memory_order_relaxed);
  uint64_t expected = writing_word(pid_);
  // Release: the consumer that sees READY sees every byte written before.
  const bool ok = h->state.compare_exchange_strong(expected, kReady, std::memory_order_acq_rel);
  PRONGHORN_ASSERT(ok, "commit of slot ", index, " not held by this process");
  shared_->committed.fetch_add(1, std::memory_order_relaxed);
  shared_->ready_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(&shared_->ready_seq);
}

namespace {

// Puts a slot back to FREE; the caller bumps free_seq and wakes writers.
void make_free(SlotHeader* h) {
  h->owner_start.store(0, std::memory_order_relaxed);
  h->state.store(kFree, std::memory_order_release);
}

}  // namespace

void Ring::abandon(uint32_t index) {
  SlotHeader* h = shared_->slot(index);
  PRONGHORN_ASSERT(h->state.load(std::memory_order_acquire) == writing_word(pid_));
  make_free(h);
  shared_->abandoned.fetch_add(1, std::memory_order_relaxed);
  shared_->free_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(&shared_->free_seq);
}

uint32_t Ring::reclaim_dead_writers() {
  uint32_t reclaimed = 0;
  for (uint32_t i = 0; i < shared_->slots; ++i) {
    SlotHeader* h = shared_->slot(i);
    uint64_t word = h->state.load(std::memory_order_acquire);
    if (state_of(word) != kWriting) continue;
    const uint64_t start = h->owner_start.load(std::memory_order_acquire);
    if (process_alive(pid_of(word), start)) continue;
    h->owner_start.store(0, std::memory_order_relaxed);
    if (h->state.compare_exchange_strong(word, kFree, std::memory_order_acq_rel)) ++reclaimed;
  }
  if (reclaimed > 0) {
    shared_->reclaimed.fetch_add(reclaimed, std::memory_order_relaxed);
    shared_->free_seq.fetch_add(1, std::memory_order_release);
    futex_wake_all(&shared_->free_seq);
  }
  return reclaimed;
}

std::optional<std::vector<TakenSlot>> Ring::take(uint32_t count, uint64_t learner_version,
                                                 uint64_t max_lag,
                                                 std::chrono::milliseconds timeout) {
  return take_oldest(count, std::nullopt, learner_version, max_lag, timeout);
}

std::optional<std::vector<TakenSlot>> Ring::take_from(uint32_t actor, uint32_t count,
                                                      std::chrono::milliseconds timeout) {
  return take_oldest(count, actor, 0, std::numeric_limits<uint64_t>::max(), timeout);
}

std::optional<std::vector<TakenSlot>> Ring::take_oldest(uint32_t count,
                                                        std::optional<uint32_t> only_actor,
                                                        uint64_t learner_version, uint64_t max_lag,
                                                        std::chrono::milliseconds timeout) {
  PRONGHORN_CHECK(count >= 1 && count <= shared_->slots, "ring ", name_, ": take(", count,
                  "): expected 1 to ", shared_->slots, " unrolls");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::pair<uint64_t, uint32_t>> ready;  // (commit order, slot)
  for (;;) {
    const uint32_t seen = shared_->ready_seq.load(std::memory_order_acquire);
    ready.clear();
    uint32_t dropped = 0;
    for (uint32_t i = 0; i < shared_->slots; ++i) {
      SlotHeader* h = shared_->slot(i);
      if (state_of(h->state.load(std::memory_order_acquire)) != kReady) continue;
      if (only_actor && h->stamp.actor != *only_actor) continue;
      if (h->stamp.policy_version <
          learner_version - std::min(max_lag, learner_version)) {  // too old to learn from
        make_free(h);
        ++dropped;
        continue;
      }
      ready.emplace_back(h->commit_seq, i);
    }
    if (dropped > 0) {
      shared_->dropped_stale.fetch_add(dropped, std::memory_order_relaxed);
      shared_->free_seq.fetch_add(1, std::memory_order_release);
      futex_wake_all(&shared_->free_seq);
    }
    if (ready.size() >= count) {
      std::partial_sort(ready.begin(), ready.begin() + count, ready.end());
      std::vector<TakenSlot> taken;
      for (uint32_t k = 0; k < count; ++k) {
        SlotHeader* h = shared_->slot(ready[k].second);
        h->state.store(kReading, std::memory_order_relaxed);  // only the consumer leaves READY
        taken.push_back({ready[k].second, slot_data(ready[k].second), h->stamp, h->commit_ns});
      }
      return taken;
    }
    reclaim_dead_writers();
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) return std::nullopt;
    futex_wait(&shared_->ready_seq, seen, std::min<std::chrono::nanoseconds>(left, kReclaimEvery));
  }
}

void Ring::release(const std::vector<TakenSlot>& taken) {
  for (const TakenSlot& t : taken) {
    SlotHeader* h = shared_->slot(t.index);
    PRONGHORN_ASSERT(state_of(h->state.load(std::memory_order_acquire)) == kReading);
    make_free(h);
  }
  shared_->consumed.fetch_add(taken.size(), std::memory_order_relaxed);
  shared_->free_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(&shared_->free_seq);
}

RingCounters Ring::counters() const {
  RingCounters c;
  c.committed = shared_->committed.load(std::memory_order_relaxed);
  c.consumed = shared_->consumed.load(std::memory_order_relaxed);
  c.dropped_stale = shared_->dropped_stale.load(std::memory_order_relaxed);
  c.reclaimed = shared_->reclaimed.load(std::memory_order_relaxed);
  c.abandoned = shared_->abandoned.load(std::memory_order_relaxed);
  c.slots = shared_->slots;
  for (uint32_t i = 0; i < shared_->slots; ++i) {
    c.ready += state_of(shared_->slot(i)->state.load(std::memory_order_relaxed)) == kReady;
  }
  return c;
}

}  // namespace pronghorn::buffer
