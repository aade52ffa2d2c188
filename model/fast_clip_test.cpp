// Fused gradient clipping (model/fast_clip.h) against LibTorch's
// clip_grad_norm_ in float64.
#include "model/fast_clip.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

namespace pronghorn {
namespace {

// Parameters of a small MLP's shapes with gradients of size `scale`, one
// without a gradient; `dtype` for the reference.
std::vector<at::Tensor> with_gradients(double scale, at::ScalarType dtype) {
  torch::manual_seed(41);
  std::vector<at::Tensor> params;
  for (const auto& shape : {std::vector<int64_t>{64, 4}, {64}, {2, 64}, {2}, {1, 64}, {1}}) {
    at::Tensor p = at::randn(shape).to(dtype);
    p.mutable_grad() = (at::randn(shape) * scale).to(dtype);
    params.push_back(p);
  }
  params.push_back(at::randn({3}).to(dtype));  // no gradient: left out
  return params;
}

TEST(FastClipTest, NormAndScaledGradientsMatchLibTorchInFloat64) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double scale : {1e-3, 1.0, 30.0}) {
    for (double max_norm : {0.5, 40.0, inf}) {  // clipped or not, depending on the scale
      std::vector<at::Tensor> fused = with_gradients(scale, at::kFloat),
                              ref = with_gradients(scale, at::kDouble);
      const double got = fused_clip_grad_norm(fused, max_norm);
      const double want = torch::nn::utils::clip_grad_norm_(ref, max_norm);
      EXPECT_NEAR(got, want, 1e-6 * want) << "scale " << scale << " max_norm " << max_norm;
      for (size_t i = 0; i + 1 < fused.size(); ++i) {
        const at::Tensor g = fused[i].grad().to(at::kDouble), r = ref[i].grad();
        EXPECT_LE((g - r).abs().max().item<double>(), 1e-6 * r.abs().max().item<double>())
            << "scale " << scale << " max_norm " << max_norm << " gradient " << i;
      }
      EXPECT_FALSE(fused.back().grad().defined());
      if (want > max_norm) {  // it clipped: the new norm is max_norm
        double squares = 0;
        for (const at::Tensor& p : fused) {
          if (p.grad().defined()) squares += p.grad().to(at::kDouble).pow(2).sum().item<double>();
        }
        EXPECT_NEAR(std::sqrt(squares), max_norm, 1e-5 * max_norm);
      }
    }
  }
}

TEST(FastClipTest, NonFiniteNormIsReturnedAndNothingScaled) {
  std::vector<at::Tensor> params = with_gradients(1.0, at::kFloat);
  params[2].mutable_grad()[0][5] = std::nanf("");
  const at::Tensor before = params[0].grad().clone();
  EXPECT_TRUE(std::isnan(fused_clip_grad_norm(params, 0.5)));
  EXPECT_TRUE(at::equal(params[0].grad(), before));
}

TEST(FastClipTest, OtherGradientsGoToLibTorch) {
  std::vector<at::Tensor> params = with_gradients(30.0, at::kDouble);
  std::vector<at::Tensor> ref = with_gradients(30.0, at::kDouble);
  EXPECT_DOUBLE_EQ(fused_clip_grad_norm(params, 0.5), torch::nn::utils::clip_grad_norm_(ref, 0.5));
  EXPECT_TRUE(at::equal(params[0].grad(), ref[0].grad()));
}

}  // namespace
}  // namespace pronghorn
