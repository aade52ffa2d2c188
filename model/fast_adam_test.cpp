// The fused Adam step (model/fast_adam.h) against LibTorch's Adam::step() in
// float64, over several steps, and its state as LibTorch's.
#include "model/fast_adam.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace pronghorn {
namespace {

std::vector<at::Tensor> parameters(at::ScalarType dtype) {
  torch::manual_seed(31);
  std::vector<at::Tensor> params;
  for (auto shape : {std::vector<int64_t>{64, 4}, {64}, {3, 64}, {1}}) {
    params.push_back(at::randn(shape).to(dtype).requires_grad_(true));
  }
  return params;
}

TEST(FastAdamTest, StepsMatchLibTorchsAdamInFloat64AndLeaveItsState) {
  for (double weight_decay : {0.0, 0.01}) {
    const auto options = torch::optim::AdamOptions(7e-3).eps(1e-5).weight_decay(weight_decay);
    std::vector<at::Tensor> fused = parameters(at::kFloat), ref = parameters(at::kDouble);
    torch::optim::Adam fused_adam(fused, options), ref_adam(ref, options);
    for (int step = 1; step <= 5; ++step) {
      for (size_t i = 0; i < fused.size(); ++i) {
        // Gradients of every size, some near zero, the same in both.
        const at::Tensor g = at::randn(fused[i].sizes()) * std::pow(10.0, step - 3);
        fused[i].mutable_grad() = g.clone();
        ref[i].mutable_grad() = g.to(at::kDouble);
      }
      // No state before the first step: that one is LibTorch's.
      EXPECT_EQ(fused_adam_applies(fused_adam), step > 1) << "step " << step;
      fused_adam_step(fused_adam);
      ref_adam.step();
      for (size_t i = 0; i < fused.size(); ++i) {
        const std::string what = "step " + std::to_string(step) + " decay " +
                                 std::to_string(weight_decay) + " parameter " + std::to_string(i);
        EXPECT_TRUE(at::allclose(fused[i].detach().to(at::kDouble), ref[i].detach(), 1e-6, 1e-6))
            << what;
      }
    }
    // The state is LibTorch's: its step counts and moments, which a save()
    // writes and the other path reads.
    for (size_t i = 0; i < fused.size(); ++i) {
      auto& f = static_cast<torch::optim::AdamParamState&>(
          *fused_adam.state().at(optimizer_state_key(fused[i])));
      auto& r = static_cast<torch::optim::AdamParamState&>(
          *ref_adam.state().at(optimizer_state_key(ref[i])));
      EXPECT_EQ(f.step(), 5);
      EXPECT_EQ(f.step(), r.step());
      EXPECT_TRUE(at::allclose(f.exp_avg().to(at::kDouble), r.exp_avg(), 1e-5, 1e-7));
      EXPECT_TRUE(at::allclose(f.exp_avg_sq().to(at::kDouble), r.exp_avg_sq(), 1e-5, 1e-9));
    }
  }
}

TEST(FastAdamTest, AmsGradAndDoubleParametersTakeLibTorchsStep) {
  std::vector<at::Tensor> params = parameters(at::kFloat);
  torch::optim::Adam amsgrad(params, torch::optim::AdamOptions(1e-3).amsgrad(true));
  for (at::Tensor& p : params) p.mutable_grad() = at::ones_like(p);
  amsgrad.step();
  EXPECT_FALSE(fused_adam_applies(amsgrad));
  std::vector<at::Tensor> doubles = parameters(at::kDouble);
  torch::optim::Adam adam(doubles, torch::optim::AdamOptions(1e-3));
  for (at::Tensor& p : doubles) p.mutable_grad() = at::ones_like(p);
  adam.step();
  EXPECT_FALSE(fused_adam_applies(adam));
}

}  // namespace
}  // namespace pronghorn
