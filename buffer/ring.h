// The ring of unroll slots in shared memory between actors and the learner
// (docs/architecture.md §1): actor claims a FREE slot → writes the unroll in place →
// commits it READY → learner takes B READY slots (oldest commits first),
// reads them in place → releases them FREE.
//
// Each slot's state is one 64-bit word in shared memory (state in the low
// byte, the writer's pid in the high half), changed only by compare-and-swap:
//   FREE → WRITING(pid) → READY → READING → FREE,  and WRITING(pid) → FREE
// when the writer abandons the slot or dies (reclaim_dead_writers: the pid is
// gone, a zombie, or reused by a process that started later). A slot is READY
// only after every byte is written, so no torn unroll is delivered; only the
// consumer moves READY on, so none is delivered twice or lost.
// Waiting blocks in the kernel on a futex word per direction (no spinning,
// no sleep-polling); every wait has a timeout. One consumer per ring.
//
// Threads: any number of producer threads/processes; one consumer thread.
// Test: buffer/ring_test.cpp. Bench: `pronghorn bench ring`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer/shared_memory.h"
#include "buffer/unroll_spec.h"

namespace pronghorn::buffer {

struct RingCounters {
  uint64_t committed = 0;      // unrolls made READY
  uint64_t consumed = 0;       // unrolls taken and released by the learner
  uint64_t dropped_stale = 0;  // READY unrolls older than max_policy_lag, dropped
  uint64_t reclaimed = 0;      // slots freed after their writer died
  uint64_t abandoned = 0;      // slots given back unwritten by a live writer
  uint64_t ready = 0;          // occupancy: READY slots now
  uint64_t slots = 0;
};

// What the writer stamps on an unroll when it commits it.
struct SlotStamp {
  uint64_t policy_version = 0;
  uint32_t episodes = 0;  // finished episodes recorded in the slot
  uint32_t actor = 0;
  // Where the actor's time went while making this unroll, in microseconds.
  uint32_t env_us = 0;     // stepping the envs (with env.splits: waiting on them)
  uint32_t policy_us = 0;  // policy forward and sampling
  uint32_t wait_us = 0;    // claiming the slot and reading new weights
  uint32_t reserved = 0;
};

// CLOCK_MONOTONIC now, in nanoseconds: the clock of TakenSlot::commit_ns.
uint64_t monotonic_ns();

// A slot taken by the consumer, readable in place until released.
struct TakenSlot {
  uint32_t index = 0;
  const uint8_t* data = nullptr;  // slot_layout(spec).bytes bytes
  SlotStamp stamp;
  uint64_t commit_ns = 0;  // CLOCK_MONOTONIC at commit
};

class Ring {
 public:
  // Creates the ring `name` (a POSIX shm name, "/…"; a learner's comes from
  // segment_names.h), mode 0600, its memory reserved in /dev/shm. Throws
  // Error when `name` exists or /dev/shm lacks the space
  // (SharedMemory::create). The creator owns it and unlinks it on destruction.
  static std::unique_ptr<Ring> create(const std::string& name, const UnrollSpec& spec,
                                      uint32_t slots);
  // Attaches to an existing ring; throws Error unless its magic, layout
  // version and spec hash match.
  static std::unique_ptr<Ring> attach(const std::string& name, const UnrollSpec& spec);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  const SlotLayout& layout() const { return layout_; }
  uint32_t slots() const;

  // Producer: a FREE slot to write, waiting up to `timeout` for one.
  std::optional<uint32_t> claim(std::chrono::milliseconds timeout);
  uint8_t* slot_data(uint32_t index);
  void commit(uint32_t index, const SlotStamp& stamp);
  void abandon(uint32_t index);

  // Consumer: `count` READY unrolls not older than max_lag versions behind
  // learner_version, oldest commits first, or nothing on timeout. Older ones
  // met on the way are dropped and counted.
  std::optional<std::vector<TakenSlot>> take(uint32_t count, uint64_t learner_version,
                                             uint64_t max_lag, std::chrono::milliseconds timeout);
  // Consumer: `count` READY unrolls written by actor `actor`, oldest commits
  // first, whatever their policy version (run.deterministic gathers each
  // batch actor by actor), or nothing on timeout.
  std::optional<std::vector<TakenSlot>> take_from(uint32_t actor, uint32_t count,
                                                  std::chrono::milliseconds timeout);
  void release(const std::vector<TakenSlot>& taken);

  // Frees slots whose writer died; returns how many. take() and claim() call
  // it while they wait.
  uint32_t reclaim_dead_writers();

  RingCounters counters() const;

  struct Shared;  // the segment's header (ring.cpp)

 private:
  Ring(std::string name, SharedMemory memory, SlotLayout layout);
  // take() and take_from(): of actor `only_actor` when set; READY unrolls
  // older than max_lag versions are dropped.
  std::optional<std::vector<TakenSlot>> take_oldest(uint32_t count,
                                                    std::optional<uint32_t> only_actor,
                                                    uint64_t learner_version, uint64_t max_lag,
                                                    std::chrono::milliseconds timeout);

  std::string name_;
  SharedMemory memory_;
  SlotLayout layout_;
  Shared* shared_;
  uint64_t pid_;
  uint64_t start_time_;
  std::atomic<uint32_t> hint_{0};  // where claim() starts looking
};

}  // namespace pronghorn::buffer
