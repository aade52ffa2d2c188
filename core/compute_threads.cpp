#include "core/compute_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

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

}  // namespace pronghorn
