// The fused losses against a naive float64 LibTorch reference (the literal
// formulas), values and gradients, the latter from LibTorch autograd on the
// reference, over a grid of shapes, both losses, both reductions, extreme
// log-ratios and large logits.
#include "kernels/losses.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include "core/testing/error_of.h"
#include "kernels/testing/compare.h"

namespace pronghorn::kernels {
namespace {

using testing::all_close;

struct Reference {
  at::Tensor total, policy, value, entropy, mean_ratio, clip_fraction, approx_kl;
};

// The literal losses in float64 from log π (differentiable) and the entropy.
Reference reference_from(const at::Tensor& log_pi, const at::Tensor& entropy,
                         const at::Tensor& values, const at::Tensor& behaviour,
                         const at::Tensor& advantages, const at::Tensor& targets,
                         const LossOptions& o, const at::Tensor& old_values = {}) {
  auto reduce = [&](const at::Tensor& t) { return o.mean_reduction ? t.mean() : t.sum(); };
  at::Tensor adv = advantages.to(at::kDouble);
  at::Tensor log_ratio =
      behaviour.defined() ? log_pi - behaviour.to(at::kDouble) : at::zeros_like(log_pi);
  at::Tensor ratio = log_ratio.exp();
  at::Tensor policy;
  if (o.kind == LossKind::kImpala) {
    policy = -adv * log_pi;
  } else {
    policy = -at::min(ratio * adv, at::clamp(ratio, 1 - o.ppo_clip, 1 + o.ppo_clip) * adv);
  }
  at::Tensor value = 0.5 * (targets.to(at::kDouble) - values).pow(2);
  if (old_values.defined() && o.value_clip > 0) {
    const at::Tensor old = old_values.to(at::kDouble);
    const at::Tensor clipped = old + at::clamp(values - old, -o.value_clip, o.value_clip);
    value = at::max(value, 0.5 * (targets.to(at::kDouble) - clipped).pow(2));
  }
  Reference r;
  r.policy = reduce(policy);
  r.value = reduce(value);
  r.entropy = reduce(entropy);
  r.total = r.policy + o.baseline_cost * r.value - o.entropy_cost * r.entropy;
  r.mean_ratio = ratio.mean();
  r.clip_fraction = ((ratio - 1).abs() > o.ppo_clip).to(at::kDouble).mean();
  r.approx_kl = ((ratio - 1) - log_ratio).mean();
  return r;
}

void expect_terms(const LossResult& got, const Reference& want, double rtol) {
  EXPECT_TRUE(all_close(got.total, want.total.detach(), rtol, 1e-5)) << "total";
  EXPECT_TRUE(all_close(got.policy, want.policy.detach(), rtol, 1e-5)) << "policy";
  EXPECT_TRUE(all_close(got.value, want.value.detach(), rtol, 1e-5)) << "value";
  EXPECT_TRUE(all_close(got.entropy, want.entropy.detach(), rtol, 1e-5)) << "entropy";
  EXPECT_TRUE(all_close(got.mean_ratio, want.mean_ratio.detach(), rtol, 1e-5)) << "mean_ratio";
  EXPECT_TRUE(all_close(got.clip_fraction, want.clip_fraction, 0, 1e-6)) << "clip_fraction";
  EXPECT_TRUE(all_close(got.approx_kl, want.approx_kl.detach(), rtol, 1e-5)) << "approx_kl";
}

struct Case {
  LossKind kind;
  bool mean;
  bool extreme;      // log-ratios in ±20 and large logits
  float value_clip;  // > 0: value clipping, old values V ± 0.5·N(0, 1)
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (LossKind kind : {LossKind::kImpala, LossKind::kPpo})
    for (bool mean : {true, false})
      for (bool extreme : {false, true}) all.push_back({kind, mean, extreme, 0.0f});
  all.push_back({LossKind::kPpo, true, false, 0.3f});
  all.push_back({LossKind::kPpo, false, false, 0.3f});
  return all;
}

std::string describe(const Case& c) {
  return std::string(c.kind == LossKind::kPpo ? "ppo" : "impala") + (c.mean ? " mean" : " sum") +
         (c.extreme ? " extreme" : "") + (c.value_clip > 0 ? " value_clip" : "");
}

// The values a batch started with: about half of them farther than the
// clip from V, so both branches of the clipped value loss are taken. From a
// generator of their own: the case's other inputs stay those of the case
// without value clipping.
at::Tensor old_values_for(const at::Tensor& values, const Case& c) {
  if (c.value_clip <= 0) return {};
  at::Generator own = at::detail::createCPUGenerator(values.numel());
  return values.detach() + at::randn(values.sizes(), own) * 0.5;
}

// Absolute gradient tolerance. With log-ratios of ±20, π/μ reaches 5e8 and
// multiplies terms such as z² − 1 that cancel in float32 (exactly only in
// the float64 reference), so there errors are judged against the size of the
// largest gradient of the tensor, at a few float32 epsilons.
double gradient_tolerance(const Case& c, const at::Tensor& want) {
  const double floor = c.mean ? 1e-6 : 1e-4;
  if (c.extreme) return std::max(floor, 1e-5 * want.abs().max().item<double>());
  return floor;
}

// Behaviour log-probs: the target's own, shifted by a log-ratio.
at::Tensor behaviour_for(const at::Tensor& log_pi, bool extreme) {
  at::Tensor shift = extreme ? at::rand(log_pi.sizes(), at::kDouble) * 40 - 20
                             : at::randn(log_pi.sizes(), at::kDouble) * 0.3;
  return (log_pi.detach() - shift).to(at::kFloat);
}

class LossGridTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(LossGridTest, CategoricalMatchesReferenceAndAutograd) {
  auto [T, B, A] = GetParam();
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c) + " T=" + std::to_string(T) + " B=" + std::to_string(B) +
                 " A=" + std::to_string(A));
    at::manual_seed(T * 1000 + B * 10 + A);
    at::Tensor logits = (at::randn({T, B, A}) * (c.extreme ? 40.0 : 1.0)).requires_grad_();
    at::Tensor values = at::randn({T, B}).requires_grad_();
    at::Tensor actions = at::randint(0, A, {T, B}, at::kLong);
    at::Tensor advantages = at::randn({T, B}), targets = at::randn({T, B});
    LossOptions o{c.kind, 0.5f, 0.01f, 0.2f, c.mean, c.value_clip};
    const at::Tensor old_values = old_values_for(values, c);

    at::Tensor logits64 = logits.detach().to(at::kDouble).requires_grad_();
    at::Tensor values64 = values.detach().to(at::kDouble).requires_grad_();
    at::Tensor log_p = at::log_softmax(logits64, -1);
    at::Tensor log_pi = log_p.gather(-1, actions.unsqueeze(-1)).squeeze(-1);
    at::Tensor entropy = -(log_p.exp() * log_p).sum(-1);
    at::Tensor behaviour = behaviour_for(log_pi, c.extreme);
    Reference want =
        reference_from(log_pi, entropy, values64, behaviour, advantages, targets, o, old_values);
    auto want_grads = torch::autograd::grad({want.total}, {logits64, values64});

    LossResult got =
        categorical_loss(logits, values, actions, behaviour, advantages, targets, o, old_values);
    const double rtol = c.extreme ? 1e-3 : 1e-4;
    expect_terms(got, want, rtol);
    got.total.backward();
    EXPECT_TRUE(all_close(logits.grad(), want_grads[0], rtol, gradient_tolerance(c, want_grads[0])))
        << "d total / d logits";
    EXPECT_TRUE(all_close(values.grad(), want_grads[1], rtol, gradient_tolerance(c, want_grads[1])))
        << "d total / d values";
  }
}

TEST_P(LossGridTest, GaussianMatchesReferenceAndAutograd) {
  auto [T, B, D] = GetParam();
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c) + " T=" + std::to_string(T) + " B=" + std::to_string(B) +
                 " D=" + std::to_string(D));
    at::manual_seed(T * 1000 + B * 10 + D + 7);
    at::Tensor mean = at::randn({T, B, D}).requires_grad_();
    at::Tensor log_std = (at::rand({T, B, D}) - 0.5).requires_grad_();
    at::Tensor values = at::randn({T, B}).requires_grad_();
    at::Tensor actions = mean.detach() + at::randn({T, B, D}) * log_std.detach().exp();
    at::Tensor advantages = at::randn({T, B}), targets = at::randn({T, B});
    LossOptions o{c.kind, 0.5f, 0.01f, 0.2f, c.mean, c.value_clip};
    const at::Tensor old_values = old_values_for(values, c);

    at::Tensor mean64 = mean.detach().to(at::kDouble).requires_grad_();
    at::Tensor log_std64 = log_std.detach().to(at::kDouble).requires_grad_();
    at::Tensor values64 = values.detach().to(at::kDouble).requires_grad_();
    at::Tensor z = (actions.to(at::kDouble) - mean64) / log_std64.exp();
    at::Tensor log_pi = (-0.5 * z * z - log_std64 - 0.5 * std::log(2 * M_PI)).sum(-1);
    at::Tensor entropy = (log_std64 + 0.5 + 0.5 * std::log(2 * M_PI)).sum(-1);
    at::Tensor behaviour = behaviour_for(log_pi, c.extreme);
    Reference want =
        reference_from(log_pi, entropy, values64, behaviour, advantages, targets, o, old_values);
    auto want_grads = torch::autograd::grad({want.total}, {mean64, log_std64, values64});

    LossResult got = gaussian_loss(mean, log_std, values, actions, behaviour, advantages, targets,
                                   o, old_values);
    const double rtol = c.extreme ? 1e-3 : 1e-4;
    expect_terms(got, want, rtol);
    got.total.backward();
    EXPECT_TRUE(all_close(mean.grad(), want_grads[0], rtol, gradient_tolerance(c, want_grads[0])))
        << "d total / d mean";
    EXPECT_TRUE(
        all_close(log_std.grad(), want_grads[1], rtol, gradient_tolerance(c, want_grads[1])))
        << "d total / d log_std";
    EXPECT_TRUE(all_close(values.grad(), want_grads[2], rtol, gradient_tolerance(c, want_grads[2])))
        << "d total / d values";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LossGridTest,
                         ::testing::Combine(::testing::Values(1, 5, 80),
                                            ::testing::Values(1, 7, 256),
                                            ::testing::Values(1, 2, 18)));

TEST(LossTest, GradientsFlowIntoTheModelThatMadeTheLogits) {
  // The loss sits in a graph: d total / d W through logits = x·W.
  at::manual_seed(1);
  at::Tensor w = at::randn({4, 3}).requires_grad_();
  at::Tensor x = at::randn({5, 2, 4});
  at::Tensor logits = at::matmul(x, w);
  at::Tensor values = at::zeros({5, 2});
  at::Tensor actions = at::randint(0, 3, {5, 2}, at::kLong);
  at::Tensor adv = at::randn({5, 2});
  LossOptions o;
  categorical_loss(logits, values, actions, at::Tensor(), adv, at::zeros({5, 2}), o)
      .total.backward();
  at::Tensor w64 = w.detach().to(at::kDouble).requires_grad_();
  at::Tensor log_p = at::log_softmax(at::matmul(x.to(at::kDouble), w64), -1);
  at::Tensor log_pi = log_p.gather(-1, actions.unsqueeze(-1)).squeeze(-1);
  at::Tensor entropy = -(log_p.exp() * log_p).sum(-1);
  at::Tensor total = (-adv.to(at::kDouble) * log_pi).mean() - 0.01 * entropy.mean();
  total.backward();
  EXPECT_TRUE(all_close(w.grad(), w64.grad(), 1e-4, 1e-6));
}

TEST(LossTest, PpoWithoutBehaviourLogProbsIsAnError) {
  at::Tensor t = at::zeros({2, 3});
  LossOptions o;
  o.kind = LossKind::kPpo;
  EXPECT_EQ(pronghorn::testing::error_of([&] {
              categorical_loss(at::zeros({2, 3, 4}), t, t.to(at::kLong), at::Tensor(), t, t, o);
            }),
            "behaviour_log_probs: the PPO loss needs them, got none");
}

TEST(LossTest, BadShapesNameTheArgument) {
  at::Tensor t = at::zeros({2, 3});
  LossOptions o;
  EXPECT_EQ(
      pronghorn::testing::error_of([&] {
        categorical_loss(at::zeros({2, 3, 4}), at::zeros({3, 2}), t.to(at::kLong), t, t, t, o);
      }),
      "values: expected shape [2, 3], got [3, 2]");
  EXPECT_EQ(pronghorn::testing::error_of([&] {
              gaussian_loss(at::zeros({2, 3, 1}), at::zeros({2, 3, 2}), t, t, t, t, t, o);
            }),
            "log_std: expected shape [2, 3, 1], got [2, 3, 2]");
  EXPECT_EQ(pronghorn::testing::error_of([&] {
              categorical_loss(at::zeros({2, 3, 4}), t, at::full({2, 3}, 4, at::kLong), t, t, t, o);
            }),
            "actions: expected every action in [0, 4)");
}

}  // namespace
}  // namespace pronghorn::kernels
