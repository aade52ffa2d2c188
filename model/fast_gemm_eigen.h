// gemm() (model/fast_gemm.h) by Eigen, from fast_gemm_eigen.cpp compiled
// once for each instruction set: call each only where the CPU has its
// features (has_avx512(), has_avx2()).
#pragma once

#include <cstdint>

namespace pronghorn::fast_mlp {

void gemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

void gemm_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace pronghorn::fast_mlp
