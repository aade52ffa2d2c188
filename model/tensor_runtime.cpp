#include "model/tensor_runtime.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <malloc.h>
#include <torch/cuda.h>

#include "core/error.h"

namespace pronghorn {

void set_compute_threads(int threads) {
  at::set_num_threads(threads);
  // Looked up at run time: present only when the BLAS that LibTorch loaded
  // is OpenBLAS (Debian picks it through alternatives).
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

void keep_freed_memory_in_heap() {
  mallopt(M_MMAP_MAX, 0);              // blocks of any size from the heap: no threshold applies
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // give memory back only past 1 GiB free at the top
  mallopt(M_TOP_PAD, 64 << 20);        // grow the heap in 64 MiB steps
}

LearnerConfig::Device resolve_learner_device(LearnerConfig::Device setting) {
  using Device = LearnerConfig::Device;
  if (setting == Device::kCpu) return Device::kCpu;
  const bool cuda = torch::cuda::is_available();
  PRONGHORN_CHECK(cuda || setting == Device::kAuto,
                  "learner.device = \"cuda\": no CUDA device usable by LibTorch here "
                  "(a CPU build of LibTorch, or no GPU visible); use \"auto\" or \"cpu\"");
  return cuda ? Device::kCuda : Device::kCpu;
}

}  // namespace pronghorn
