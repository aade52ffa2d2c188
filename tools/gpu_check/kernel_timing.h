// gpu_check's timing part: each CUDA kernel at sizes a learner meets, beside
// a device-to-device copy moving the same bytes, so that the ratio says how
// close the kernel comes to the device's memory bandwidth.
#pragma once

namespace pronghorn::gpu_check {

// Prints one table row per kernel and size. `repeats` timed runs after a
// warm-up; the median counts. Throws std::runtime_error on a CUDA error.
void run_kernel_timings(int repeats);

}  // namespace pronghorn::gpu_check
