// Launchers of the CUDA kernels in vtrace.cu: raw device pointers, sizes and
// a stream in, an error string out (nullptr on success). No LibTorch here, so
// nvcc stays fast and independent of the installed LibTorch build.
#pragma once

#include "kernels/vtrace_math.h"

namespace pronghorn::kernels::cuda {

// One thread per column b; `stream` is a cudaStream_t (nullptr: default).
const char* advantages(const AdvantageInputs& in, const VtraceParams& params, bool gae,
                       const AdvantageOutputs& out, void* stream);

}  // namespace pronghorn::kernels::cuda
