// CUDA face of the fused losses: one thread per sample runs the shared
// per-sample math of kernels/loss_math.h. Launched by kernels/losses.cpp for
// CUDA tensors; compiled wherever nvcc exists, run only where a GPU is.
#include <cuda_runtime.h>

#include "kernels/losses_cuda.h"

namespace pronghorn::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void categorical_kernel(LossInputs in, LossParams params, LossOutputs out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < in.N) categorical_loss_sample(in, params, i, out);
}

__global__ void gaussian_kernel(LossInputs in, LossParams params, LossOutputs out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < in.N) gaussian_loss_sample(in, params, i, out);
}

int blocks_for(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

const char* launch_status() {
  cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? nullptr : cudaGetErrorString(status);
}

}  // namespace

const char* categorical_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out,
                             void* stream) {
  if (in.N == 0) return nullptr;
  categorical_kernel<<<blocks_for(in.N), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      in, params, out);
  return launch_status();
}

const char* gaussian_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out,
                          void* stream) {
  if (in.N == 0) return nullptr;
  gaussian_kernel<<<blocks_for(in.N), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(in, params,
                                                                                        out);
  return launch_status();
}

}  // namespace pronghorn::kernels::cuda
