// gpu_check's correctness part: the CUDA kernels of kernels/vtrace.cu and
// kernels/losses.cu against the same shared math (vtrace_math.h,
// loss_math.h) run on the host, over the shape grid of the CPU tests.
#pragma once

namespace pronghorn::gpu_check {

// Prints one line per case (PASS or FAIL with the first mismatches) and
// returns how many cases failed. Throws std::runtime_error on a CUDA error.
int run_kernel_cases();

}  // namespace pronghorn::gpu_check
