#include "model/fast_gemm.h"

#include <cblas.h>

#include "model/fast_gemm_avx512.h"

namespace pronghorn::fast_mlp {
namespace {

bool has_avx512() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v4") != 0;
  }();
  return has;
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (has_avx512()) return gemm_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

const char* gemm_backend() { return has_avx512() ? "eigen-avx512" : "openblas"; }

}  // namespace pronghorn::fast_mlp
