// Raw CUDA/NCCL queries, compiled by nvcc (no LibTorch, no std::string across
// the boundary). Only built when PRONGHORN_WITH_CUDA.
#pragma once

namespace pronghorn::kernels::cuda {

struct Probe {
  int runtime_version;
  int nccl_version;
  int device_count;
  const char* error;  // static string from the CUDA runtime, or nullptr
};

Probe probe();

}  // namespace pronghorn::kernels::cuda
