// Compiled with -march=x86-64-v4 (model/CMakeLists.txt), so Eigen takes its
// AVX-512 kernels. No other file includes Eigen, so no other copy of its
// templates exists to be merged with these at link time; fast_gemm_test
// checks that this object defines no other symbol an AVX2 file could share
// (an inline function of the standard library, say), whose AVX-512 copy the
// linker might keep for the whole program.
#include "model/fast_gemm_avx512.h"

#include <Eigen/Core>

namespace pronghorn::fast_mlp {
namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using In = Eigen::Map<const RowMajor<float>, Eigen::Unaligned, Eigen::OuterStride<>>;
using Out = Eigen::Map<RowMajor<float>, Eigen::Unaligned, Eigen::OuterStride<>>;

// op(A)·op(B) into C, C first scaled by beta (0: overwritten, NaNs included).
template <typename L, typename R>
void product(const L& left, const R& right, float beta, Out& c) {
  if (beta == 0.0f) {
    c.noalias() = left * right;
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += left * right;
  }
}

}  // namespace

void gemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // op(A) is [m, k]: A itself [m, k], or [k, m] read transposed; so for B.
  const In A(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const In B(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  Out C(c, m, n, Eigen::OuterStride<>(ldc));
  if (trans_a && trans_b) return product(A.transpose(), B.transpose(), beta, C);
  if (trans_a) return product(A.transpose(), B, beta, C);
  if (trans_b) return product(A, B.transpose(), beta, C);
  product(A, B, beta, C);
}

}  // namespace pronghorn::fast_mlp
