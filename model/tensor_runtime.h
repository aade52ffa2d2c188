// Process-wide settings for tensor maths, applied once at the start of an
// actor or learner process.
#pragma once

#include "core/config.h"

namespace pronghorn {

// learner.device as this machine has it, the one place "auto" is decided:
// kCuda when LibTorch can use a CUDA device, else kCpu. kCpu and kCuda stay
// as they are; kCuda without a usable device throws Error naming the key (the
// machine, not the config, lacks it).
LearnerConfig::Device resolve_learner_device(LearnerConfig::Device setting);

// How many threads tensor maths may use: LibTorch's intra-op pool and, when
// LibTorch's BLAS is OpenBLAS, OpenBLAS's own pool, which at::set_num_threads
// leaves alone. OpenBLAS otherwise starts one thread per core in every
// process, and an actor's and the learner's matrix products fight over the
// same cores: on 2 cores that cost a third of end-to-end throughput
// (BENCHMARKS.md).
void set_compute_threads(int threads);

// Keeps freed blocks in the heap, whatever their size. Each learner step
// allocates and frees megabytes of activations; by default glibc returns such
// blocks to the kernel and the next step faults them back in, zeroed: ten
// times the page faults and about 15% of a CartPole learner's time. Blocks
// over 32 MiB (an Atari batch's pixels and first activations) are mapped
// apart unless mmap is off: 7% of an Atari job's trained steps/s
// (BENCHMARKS.md, 2026-11-28 (late)). The main thread's arena only: glibc maps a
// thread arena's largest blocks whatever this says.
void keep_freed_memory_in_heap();

}  // namespace pronghorn
