// What accelerator this build and this machine have: whether the CUDA half of
// kernels/ was compiled (and for which architectures), the CUDA runtime and
// NCCL versions it links, and how many CUDA devices are usable right now.
// On a machine without a GPU the CUDA half still builds; device_count is 0
// and `unavailable` says why, in the driver's words.
#pragma once

#include <string>

namespace pronghorn::kernels {

struct Accelerator {
  bool cuda_built = false;
  std::string cuda_architectures;  // e.g. "80;90"; empty when not built
  int cuda_runtime_version = 0;    // 1000·major + 10·minor, e.g. 13000
  int nccl_version = 0;            // e.g. 22805 for 2.28.5
  int device_count = 0;
  std::string unavailable;  // why device_count is 0, when it is
};

Accelerator probe_accelerator();

// One line for `pronghorn --version`.
std::string describe(const Accelerator& accelerator);

}  // namespace pronghorn::kernels
