// Cross-process futex on a 32-bit word in shared memory. No FUTEX_PRIVATE
// flag: waiters and wakers live in different processes (docs/architecture.md §9).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace pronghorn::buffer {

// Sleeps while *word == expected, at most `timeout`; returns early on a wake,
// a signal, or when the value already differs.
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);

// Wakes every waiter on `word`. Call after publishing the new value.
void futex_wake_all(std::atomic<uint32_t>* word);

}  // namespace pronghorn::buffer
