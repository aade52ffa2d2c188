// Compiled twice (model/CMakeLists.txt): for AVX-512 as gemm_avx512 and for
// AVX2 + FMA as gemm_avx2 (PRONGHORN_EIGEN_GEMM), so that Eigen takes that
// instruction set's kernels. Each copy also renames Eigen's namespace
// (-DEigen=EigenAvx512, -DEigen=EigenAvx2): the two objects' templates then
// have names of their own, and the linker cannot keep one copy's AVX-512
// code for the other's calls. No other file includes Eigen. The ctests
// FastGemm*DefinesOnlyItsOwnSymbols check both, and that each object defines
// no other global symbol (an inline function of the standard library, say)
// whose copy the linker might keep for the whole program.
#include "model/fast_gemm_eigen.h"

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

void PRONGHORN_EIGEN_GEMM(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                          const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                          float* c, int64_t ldc) {
  // op(A) is [m, k]: A itself [m, k], or [k, m] read transposed; so for B.
  const In A(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  const In B(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  Out C(c, m, n, Eigen::OuterStride<>(ldc));
  // A narrow C over a long sum (a first layer's weight gradient: [64, 4]
  // over 1088 rows) took 3× less time as Cᵀ = op(B)ᵀ·op(A)ᵀ into a scratch
  // and then added in: Eigen's kernel works in panels of many rows of its
  // left operand, which a 4-column C (computed as Cᵀ's rows) leaves empty.
  if (n < 16 && m >= 16 && k > m) {
    // Eigen's own storage: a std::vector would instantiate standard library
    // code here, compiled for this copy's instruction set (see the top).
    thread_local RowMajor<float> scratch;
    scratch.resize(n, m);
    PRONGHORN_EIGEN_GEMM(!trans_b, !trans_a, n, m, k, b, ldb, a, lda, 0.0f, scratch.data(), m);
    const In transposed(scratch.data(), n, m, Eigen::OuterStride<>(m));
    if (beta == 0.0f) {
      C = transposed.transpose();
    } else {
      if (beta != 1.0f) C *= beta;
      C += transposed.transpose();
    }
    return;
  }
  if (trans_a && trans_b) return product(A.transpose(), B.transpose(), beta, C);
  if (trans_a) return product(A.transpose(), B, beta, C);
  if (trans_b) return product(A, B.transpose(), beta, C);
  product(A, B, beta, C);
}

}  // namespace pronghorn::fast_mlp
