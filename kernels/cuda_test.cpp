// The CUDA faces of the kernels against their CPU faces on the same inputs.
// Runs only where LibTorch has CUDA and a device is present; skips elsewhere
// (this build's CPU-only LibTorch cannot even allocate a CUDA tensor).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "kernels/losses.h"
#include "kernels/testing/compare.h"
#include "kernels/vtrace.h"

namespace pronghorn::kernels {
namespace {

using testing::all_close;

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef PRONGHORN_WITH_CUDA
    GTEST_SKIP() << "built without the CUDA kernels";
#endif
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device (or a CPU-only LibTorch)";
  }
};

TEST_F(CudaTest, VtraceAndGaeMatchTheCpu) {
  at::manual_seed(5);
  const int64_t T = 40, B = 300, A = 7;
  at::Tensor logits = at::randn({T, B, A}), actions = at::randint(0, A, {T, B}, at::kLong);
  at::Tensor behaviour = at::randn({T, B}) - 2, discounts = 0.99 * (at::rand({T, B}) > 0.05);
  at::Tensor rewards = at::randn({T, B}), values = at::randn({T, B}), bootstrap = at::randn({B});
  Truncation truncation{at::rand({T, B}) < 0.05, at::randn({T, B})};
  auto cuda = [](const at::Tensor& t) { return t.to(at::kCUDA); };
  const VtraceParams params{1.0f, 0.9f, 1.2f, 0.95f};
  VtraceResult cpu = vtrace_from_logits(logits, actions, behaviour, discounts, rewards, values,
                                        bootstrap, params, truncation);
  VtraceResult gpu = vtrace_from_logits(
      cuda(logits), cuda(actions), cuda(behaviour), cuda(discounts), cuda(rewards), cuda(values),
      cuda(bootstrap), params, {cuda(truncation.truncated), cuda(truncation.final_values)});
  EXPECT_TRUE(all_close(gpu.vs.cpu(), cpu.vs, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(gpu.pg_advantages.cpu(), cpu.pg_advantages, 1e-5, 1e-5));
  GaeResult cpu_gae = gae_from_logits(logits, actions, behaviour, discounts, rewards, values,
                                      bootstrap, params, truncation);
  GaeResult gpu_gae = gae_from_logits(cuda(logits), cuda(actions), cuda(behaviour), cuda(discounts),
                                      cuda(rewards), cuda(values), cuda(bootstrap), params,
                                      {cuda(truncation.truncated), cuda(truncation.final_values)});
  EXPECT_TRUE(all_close(gpu_gae.advantages.cpu(), cpu_gae.advantages, 1e-5, 1e-5));
}

TEST_F(CudaTest, LossesAndGradientsMatchTheCpu) {
  at::manual_seed(6);
  const int64_t T = 20, B = 100, A = 5;
  for (LossKind kind : {LossKind::kImpala, LossKind::kPpo}) {
    at::Tensor logits = at::randn({T, B, A}), values = at::randn({T, B});
    at::Tensor actions = at::randint(0, A, {T, B}, at::kLong);
    at::Tensor behaviour = at::randn({T, B}) - 1.5, adv = at::randn({T, B}),
               targets = at::randn({T, B});
    LossOptions options;
    options.kind = kind;
    at::Tensor cpu_logits = logits.clone().requires_grad_(),
               cpu_values = values.clone().requires_grad_();
    at::Tensor gpu_logits = logits.to(at::kCUDA).requires_grad_();
    at::Tensor gpu_values = values.to(at::kCUDA).requires_grad_();
    LossResult cpu =
        categorical_loss(cpu_logits, cpu_values, actions, behaviour, adv, targets, options);
    LossResult gpu =
        categorical_loss(gpu_logits, gpu_values, actions.to(at::kCUDA), behaviour.to(at::kCUDA),
                         adv.to(at::kCUDA), targets.to(at::kCUDA), options);
    cpu.total.backward();
    gpu.total.backward();
    EXPECT_TRUE(all_close(gpu.total.cpu(), cpu.total, 1e-5, 1e-6));
    EXPECT_TRUE(all_close(gpu_logits.grad().cpu(), cpu_logits.grad(), 1e-5, 1e-7));
    EXPECT_TRUE(all_close(gpu_values.grad().cpu(), cpu_values.grad(), 1e-5, 1e-7));
  }
}

}  // namespace
}  // namespace pronghorn::kernels
