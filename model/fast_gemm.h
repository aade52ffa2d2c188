// The fused MLP path's matrix products (model/fast_mlp.h for the actors,
// model/fast_mlp_train.h for the learner):
//   C [m, n] = op(A)·op(B) + beta·C, row-major float32, op = ᵀ where asked.
//
// Where the CPU has them, Eigen's product compiled for the widest
// instruction set it has: AVX-512, else AVX2 + FMA
// (model/fast_gemm_eigen.cpp). Debian 12's OpenBLAS 0.3.21 runs its AVX2
// kernels on both kinds of AMD EPYC measured: on a Zen 4 the eight products
// of a CartPole learner step took Eigen's AVX-512 about 0.65× their time,
// and on an AVX2-only EPYC OpenBLAS ran products 256 wide at about 10
// GFLOP/s against Eigen's 35 (`pronghorn bench policy`, BENCHMARKS.md).
// Eigen runs on the calling thread whatever `learner.threads` or
// `actor.threads` is (it is built without OpenMP). OpenBLAS split the
// learner's small products over its threads at a loss: on 2 cores, an
// optimizer step of two [256, 256] MLPs on 64 samples took 3.7–4.7 ms on two
// threads against 0.9 ms on one, through Eigen 0.9 ms on either (`pronghorn
// bench learner`, BENCHMARKS.md); the products cut by hand into one block
// per thread gave the step nothing there. Where the CPU has neither,
// OpenBLAS.
#pragma once

#include <cstdint>

namespace pronghorn::fast_mlp {

// The product by whichever backend gemm_backend() names.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The product by OpenBLAS, whatever the CPU.
void gemm_openblas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Whether this CPU (and its OS) runs AVX-512, or AVX2 with FMA: the
// conditions for calling gemm_avx512() and gemm_avx2()
// (model/fast_gemm_eigen.h).
bool has_avx512();
bool has_avx2();

// Which backend gemm() takes now: "eigen-avx512", "eigen-avx2" or
// "openblas".
const char* gemm_backend();

}  // namespace pronghorn::fast_mlp
