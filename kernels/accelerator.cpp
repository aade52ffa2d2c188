#include "kernels/accelerator.h"

#include <fmt/format.h>

#ifdef PRONGHORN_WITH_CUDA
#include "kernels/cuda_probe.h"
#endif

namespace pronghorn::kernels {

Accelerator probe_accelerator() {
  Accelerator a;
#ifdef PRONGHORN_WITH_CUDA
  cuda::Probe p = cuda::probe();
  a.cuda_built = true;
  a.cuda_architectures = PRONGHORN_CUDA_ARCHITECTURES;
  a.cuda_runtime_version = p.runtime_version;
  a.nccl_version = p.nccl_version;
  a.device_count = p.device_count;
  if (p.device_count == 0) a.unavailable = p.error != nullptr ? p.error : "no CUDA device found";
#else
  a.unavailable = "built without CUDA";
#endif
  return a;
}

std::string describe(const Accelerator& a) {
  if (!a.cuda_built) return "CUDA: not built";
  std::string line =
      fmt::format("CUDA: built for sm {} (runtime {}.{}, NCCL {}.{}.{}); ", a.cuda_architectures,
                  a.cuda_runtime_version / 1000, a.cuda_runtime_version % 1000 / 10,
                  a.nccl_version / 10000, a.nccl_version % 10000 / 100, a.nccl_version % 100);
  if (a.device_count > 0) return line + fmt::format("{} device(s)", a.device_count);
  return line + "no device: " + a.unavailable;
}

}  // namespace pronghorn::kernels
