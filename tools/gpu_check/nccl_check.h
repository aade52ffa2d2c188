// gpu_check's NCCL part: the project's own NcclCollective (distributed/
// nccl_collective.h) over the real NcclApi (nccl_api_cuda.cpp: NCCL and the
// CUDA runtime, no LibTorch), one rank on device 0.
#pragma once

namespace pronghorn::gpu_check {

// Prints one line per step and returns how many failed. A step that runs past
// its deadline is a hang: it is reported and the process ends at once (exit 1).
int run_nccl_checks();

}  // namespace pronghorn::gpu_check
