// The four counters a run continues from: what a checkpoint holds
// (learner/checkpoint.h), what a resume restores (learner/resume.h) and what
// rank 0 gives every rank at start (learner/data_parallel.h, broadcast as
// raw bytes: keep it trivially copyable, u64 fields only).
#pragma once

#include <cstdint>
#include <type_traits>

namespace pronghorn::learner {

struct RunCounters {
  uint64_t env_steps = 0;       // env steps trained on, over every rank
  uint64_t learner_steps = 0;   // batches learned from (one version each)
  uint64_t episodes = 0;        // episodes ended in those env steps
  uint64_t policy_version = 0;  // the slab's version: one per learner step and one per start

  bool operator==(const RunCounters&) const = default;
};

static_assert(std::is_trivially_copyable_v<RunCounters> && sizeof(RunCounters) == 32,
              "RunCounters travels as 32 raw bytes (a checkpoint's counters section, the "
              "initial broadcast)");

}  // namespace pronghorn::learner
