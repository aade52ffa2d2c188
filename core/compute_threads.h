// How many threads a process's tensor maths may use: LibTorch's intra-op
// pool and, when LibTorch's BLAS is OpenBLAS, OpenBLAS's own pool, which
// at::set_num_threads leaves alone. OpenBLAS otherwise starts one thread per
// core in every process, and an actor's and the learner's matrix products
// then fight over the same cores: on 2 cores this cost 40% of end-to-end
// throughput (BENCHMARKS.md).
#pragma once

namespace pronghorn {

void set_compute_threads(int threads);

}  // namespace pronghorn
