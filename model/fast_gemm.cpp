#include "model/fast_gemm.h"

#include <cblas.h>

#include "model/fast_gemm_eigen.h"

namespace pronghorn::fast_mlp {
namespace {

enum class Backend { kOpenBlas, kEigenAvx2, kEigenAvx512 };

Backend backend() {
  if (has_avx512()) return Backend::kEigenAvx512;
  return has_avx2() ? Backend::kEigenAvx2 : Backend::kOpenBlas;
}

}  // namespace

bool has_avx2() {
  // gemm_avx2's features (model/CMakeLists.txt); the OS saves the AVX
  // registers wherever libgcc reports AVX2.
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}

bool has_avx512() {
  // gemm_avx512's features (model/CMakeLists.txt): gemm_avx2's and these.
  // libgcc's answer includes the OS: it reports AVX-512 only where the OS
  // saves the wide registers (XCR0).
  static const bool has = has_avx2() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return has;
}

void gemm_openblas(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  switch (backend()) {
    case Backend::kEigenAvx512:
      return gemm_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    case Backend::kEigenAvx2:
      return gemm_avx2(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    case Backend::kOpenBlas:
      return gemm_openblas(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  }
}

const char* gemm_backend() {
  switch (backend()) {
    case Backend::kEigenAvx512:
      return "eigen-avx512";
    case Backend::kEigenAvx2:
      return "eigen-avx2";
    case Backend::kOpenBlas:
      break;
  }
  return "openblas";
}

}  // namespace pronghorn::fast_mlp
