// The fused MLP path's matrix products (model/fast_mlp.h for the actors,
// model/fast_mlp_train.h for the learner):
//   C [m, n] = op(A)·op(B) + beta·C, row-major float32, op = ᵀ where asked.
//
// OpenBLAS's sgemm, except on a CPU with AVX-512 (x86-64-v4), where Eigen's
// product compiled for it runs instead (model/fast_gemm_avx512.cpp): Debian
// 12's OpenBLAS 0.3.21 runs its AVX2 Haswell kernels on an AMD Zen 4, and at
// a CartPole batch's shapes ([1088, 64] · [64, 64]) Eigen's AVX-512 product
// took 0.6× their time there (`pronghorn bench policy`, BENCHMARKS.md).
// On an AVX2 CPU the two were level, so OpenBLAS stays.
#pragma once

#include <cstdint>

namespace pronghorn::fast_mlp {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Which of the two gemm() runs here: "eigen-avx512" or "openblas".
const char* gemm_backend();

}  // namespace pronghorn::fast_mlp
