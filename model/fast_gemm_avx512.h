// gemm() (model/fast_gemm.h) by Eigen, compiled for AVX-512 in
// fast_gemm_avx512.cpp alone: call it only where has_avx512().
#pragma once

#include <cstdint>

namespace pronghorn::fast_mlp {

void gemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace pronghorn::fast_mlp
