// Asks the CUDA runtime and NCCL what they are and what they see. Every call
// here fails cleanly on a machine with no GPU or driver; the error string says
// why. Run by `pronghorn --version` and kernels/accelerator_test.cpp.
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda_probe.h"

namespace pronghorn::kernels::cuda {

Probe probe() {
  Probe p{0, 0, 0, nullptr};
  cudaRuntimeGetVersion(&p.runtime_version);
  ncclGetVersion(&p.nccl_version);
  cudaError_t status = cudaGetDeviceCount(&p.device_count);
  if (status != cudaSuccess) {
    p.device_count = 0;
    p.error = cudaGetErrorString(status);
  }
  return p;
}

}  // namespace pronghorn::kernels::cuda
