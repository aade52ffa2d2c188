#include "model/policy_bench.h"

#include <algorithm>
#include <vector>

#include "model/fast_gemm.h"
#include "model/fast_gemm_eigen.h"

namespace pronghorn::policy_bench {

const char* matrix_product_backend() { return fast_mlp::gemm_backend(); }

ProductTimes time_learner_products(const ModelSpec& model, int64_t rows,
                                   const MedianUs& median_us) {
  int64_t inputs = 1;
  for (int64_t d : model.obs_shape) inputs *= d;
  // The widths of each MLP: the policy's torso and head, and
  // (model.separate_value) the value's torso and head.
  const auto mlp = [inputs](const std::vector<int64_t>& hidden, int64_t head) {
    std::vector<int64_t> widths = {inputs};
    widths.insert(widths.end(), hidden.begin(), hidden.end());
    widths.push_back(head);
    return widths;
  };
  std::vector<std::vector<int64_t>> mlps = {mlp(model.hidden, model.actions)};
  if (model.separate_value) mlps.push_back(mlp(model.value_widths(), 1));
  int64_t widest = 1;
  for (const auto& width : mlps) {
    for (int64_t w : width) widest = std::max(widest, w);
  }
  std::vector<float> x(rows * widest, 0.5f), y(rows * widest), w(widest * widest, 0.01f),
      dw(widest * widest);
  using Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*,
                        int64_t, float, float*, int64_t);
  auto time = [&](Gemm gemm) {
    return median_us([&] {
      for (const auto& width : mlps) {
        for (size_t l = 0; l + 1 < width.size(); ++l) {
          const int64_t in = width[l], out = width[l + 1];
          gemm(false, true, rows, out, in, x.data(), in, w.data(), in, 0.0f, y.data(), out);
          gemm(true, false, out, in, rows, y.data(), out, x.data(), in, 1.0f, dw.data(), in);
          if (l > 0) {
            gemm(false, false, rows, in, out, y.data(), out, w.data(), in, 0.0f, x.data(), in);
          }
        }
      }
    });
  };
  ProductTimes times;
  times.openblas_us = time(fast_mlp::gemm_openblas);
  if (fast_mlp::has_avx2()) times.avx2_us = time(fast_mlp::gemm_avx2);
  if (fast_mlp::has_avx512()) times.avx512_us = time(fast_mlp::gemm_avx512);
  return times;
}

}  // namespace pronghorn::policy_bench
