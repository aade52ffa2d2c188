// The fused MLP path's matrix products (model/fast_mlp.h for the actors,
// model/fast_mlp_train.h for the learner):
//   C [m, n] = op(A)·op(B) + beta·C, row-major float32, op = ᵀ where asked.
//
// OpenBLAS's sgemm, except on a CPU with AVX-512 while OpenBLAS runs one
// thread (an actor; the learner beside one actor on two cores), where
// Eigen's product compiled for AVX-512 runs instead
// (model/fast_gemm_avx512.cpp). Debian 12's OpenBLAS 0.3.21 runs its AVX2
// Haswell kernels on an AMD Zen 4, and there the eight products of a
// CartPole learner step took Eigen about 0.65× their time (`pronghorn bench
// policy`, BENCHMARKS.md). On an AVX2 CPU the two were level, so OpenBLAS
// stays; with several threads OpenBLAS splits a product, Eigen (built
// without OpenMP) would not.
#pragma once

#include <cstdint>

namespace pronghorn::fast_mlp {

// The product by whichever backend gemm_backend() names.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The product by OpenBLAS, whatever the CPU.
void gemm_openblas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Whether this CPU (and its OS) runs AVX-512: the condition for calling
// gemm_avx512() (model/fast_gemm_avx512.h).
bool has_avx512();

// Which backend gemm() takes now: "eigen-avx512" or "openblas".
const char* gemm_backend();

}  // namespace pronghorn::fast_mlp
