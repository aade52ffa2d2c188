#include "model/fast_gemm.h"

#include <cblas.h>

#include "model/fast_gemm_avx512.h"

namespace pronghorn::fast_mlp {
namespace {

bool use_eigen() { return has_avx512() && openblas_get_num_threads() == 1; }

}  // namespace

bool has_avx512() {
  // The features fast_gemm_avx512.cpp is compiled for (model/CMakeLists.txt).
  // libgcc's answer includes the OS: it reports AVX-512 only where the OS
  // saves the wide registers (XCR0).
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  }();
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
  if (use_eigen()) return gemm_avx512(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  gemm_openblas(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

const char* gemm_backend() { return use_eigen() ? "eigen-avx512" : "openblas"; }

}  // namespace pronghorn::fast_mlp
