// The fused path's matrix products (model/fast_gemm.h), each backend the CPU
// has, against LibTorch in float64: every transpose, β = 0 (over NaN), 1 and
// ½, leading dimensions wider than the matrices.
#include "model/fast_gemm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "model/fast_gemm_eigen.h"
#include "model/tensor_runtime.h"

namespace pronghorn::fast_mlp {
namespace {

using Gemm = std::function<void(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t,
                                const float*, int64_t, float, float*, int64_t)>;

void check(const Gemm& f, const std::string& backend) {
  torch::manual_seed(51);
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        for (auto [m, n, k] : {std::array<int64_t, 3>{1088, 64, 64},
                               {1088, 2, 64},
                               {128, 256, 256},
                               {64, 4, 1088},
                               {7, 1, 3},
                               {5, 3, 0}}) {
          const std::string what = backend + " op(A) " + (ta ? "ᵀ" : "") + " op(B) " +
                                   (tb ? "ᵀ" : "") + " β " + std::to_string(beta) + " m " +
                                   std::to_string(m) + " n " + std::to_string(n) + " k " +
                                   std::to_string(k);
          // Stored with 3 spare columns each: lda, ldb, ldc beyond the widths.
          const at::Tensor a = at::randn({ta ? k : m, (ta ? m : k) + 3});
          const at::Tensor b = at::randn({tb ? n : k, (tb ? k : n) + 3});
          at::Tensor c = at::randn({m, n + 3});
          if (beta == 0.0f) c.slice(1, 0, n).fill_(std::numeric_limits<float>::quiet_NaN());
          const at::Tensor a_op = ta ? a.slice(1, 0, m).t() : a.slice(1, 0, k);
          const at::Tensor b_op = tb ? b.slice(1, 0, k).t() : b.slice(1, 0, n);
          at::Tensor want = at::mm(a_op.to(at::kDouble), b_op.to(at::kDouble));
          if (beta != 0.0f) want += beta * c.slice(1, 0, n).to(at::kDouble);
          const at::Tensor spare = c.slice(1, n).clone();
          f(ta, tb, m, n, k, a.data_ptr<float>(), a.size(1), b.data_ptr<float>(), b.size(1), beta,
            c.data_ptr<float>(), c.size(1));
          const double scale = 1 + want.abs().max().item<double>();
          EXPECT_LT((c.slice(1, 0, n).to(at::kDouble) - want).abs().max().item<double>(),
                    1e-5 * scale)
              << what;
          EXPECT_TRUE(at::equal(c.slice(1, n), spare)) << what << ": wrote past n columns";
        }
      }
    }
  }
}

TEST(FastGemmTest, OpenBlasProductsMatchLibTorchInFloat64) { check(gemm_openblas, "openblas"); }

TEST(FastGemmTest, EigenAvx512ProductsMatchLibTorchInFloat64) {
  if (!has_avx512()) GTEST_SKIP() << "this CPU has no AVX-512";
  check(gemm_avx512, "eigen-avx512");
}

TEST(FastGemmTest, EigenAvx2ProductsMatchLibTorchInFloat64) {
  if (!has_avx2()) GTEST_SKIP() << "this CPU has no AVX2 with FMA";
  check(gemm_avx2, "eigen-avx2");
}

TEST(FastGemmTest, TheDispatchedProductsMatchLibTorchInFloat64) {
  check(gemm, std::string("gemm (") + gemm_backend() + ")");
}

// A learner of several threads (set_compute_threads also sizes OpenBLAS's
// pool) keeps the product one thread gets: Eigen's where the CPU has AVX2
// (OpenBLAS's threads made its small products slower, not faster),
// OpenBLAS's otherwise.
TEST(FastGemmTest, SeveralComputeThreadsKeepEigensProducts) {
  const int threads = at::get_num_threads();
  const std::string expected = has_avx512() ? "eigen-avx512"
                               : has_avx2() ? "eigen-avx2"
                                            : "openblas";
  set_compute_threads(4);
  EXPECT_EQ(gemm_backend(), expected);
  check(gemm, std::string("gemm (") + gemm_backend() + ") on 4 threads");
  set_compute_threads(threads);
}

}  // namespace
}  // namespace pronghorn::fast_mlp
