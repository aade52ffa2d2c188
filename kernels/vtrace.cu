// CUDA face of V-trace / GAE(λ): one thread per column runs the shared
// reverse scan of kernels/vtrace_math.h. Launched by kernels/vtrace.cpp for
// CUDA tensors; compiled wherever nvcc exists, run only where a GPU is.
#include <cuda_runtime.h>

#include "kernels/vtrace_cuda.h"

namespace pronghorn::kernels::cuda {
namespace {

__global__ void advantage_kernel(AdvantageInputs in, VtraceParams params, bool gae,
                                 AdvantageOutputs out) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < in.B) advantage_column(in, params, gae, b, out);
}

}  // namespace

const char* advantages(const AdvantageInputs& in, const VtraceParams& params, bool gae,
                       const AdvantageOutputs& out, void* stream) {
  if (in.B == 0 || in.T == 0) return nullptr;
  constexpr int kThreads = 128;
  const int blocks = static_cast<int>((in.B + kThreads - 1) / kThreads);
  advantage_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in, params, gae,
                                                                               out);
  cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
}

}  // namespace pronghorn::kernels::cuda
