// The learner's fused MLP forward and backward (model/fast_mlp_train.h)
// against the stock PolicyNet in float64: outputs, every parameter's
// gradient, and one Adam step.
#include "model/fast_mlp_train.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "model/testing/float64_copy.h"

namespace pronghorn {
namespace {

using Activation = ModelConfig::Activation;
constexpr auto kAuto = ModelConfig::FastPath::kAuto;

PolicyNet random_net(bool continuous, Activation activation, uint64_t seed,
                     bool separate_value = false, std::vector<int64_t> value_hidden = {}) {
  ModelSpec spec;
  spec.separate_value = separate_value;
  spec.value_hidden = std::move(value_hidden);
  spec.obs_shape = {2, 3};
  spec.actions = continuous ? 3 : 5;
  spec.continuous = continuous;
  spec.hidden = {32, 16};
  spec.activation = activation;
  torch::manual_seed(static_cast<int64_t>(seed));
  PolicyNet net(spec);
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : net->parameters()) p.copy_(at::randn_like(p) * 0.4);
  return net;
}

// A loss that reaches every output with its own weight: Σ g_l·logits +
// Σ g_v·value + Σ g_s·log_std.
at::Tensor weighted_sum(const PolicyOutput& out, const at::Tensor& gl, const at::Tensor& gv,
                        const at::Tensor& gs) {
  at::Tensor loss = (out.logits * gl.to(out.logits.scalar_type())).sum() +
                    (out.value * gv.to(out.value.scalar_type())).sum();
  if (out.log_std.defined()) loss = loss + (out.log_std * gs.to(out.log_std.scalar_type())).sum();
  return loss;
}

// Largest |a − b| over the tensor, relative to the reference's largest |b|.
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const double scale = std::max(1e-12, b.abs().max().item<double>());
  return (a.to(at::kDouble) - b).abs().max().item<double>() / scale;
}

// With a shared torso and with model.separate_value (a value torso of its own,
// of the policy's widths and of model.value_hidden's, deeper and wider).
TEST(FastMlpTrainTest, OutputsGradientsAndOneAdamStepMatchPolicyNetInFloat64) {
  for (bool continuous : {false, true}) {
    for (Activation activation : {Activation::kTanh, Activation::kRelu}) {
      for (int64_t rows : {1, 300, 700}) {   // 700: three blocks of rows, the last partial
        for (int value_torso : {0, 1, 2}) {  // none, hidden's widths, [24, 40, 48]
          const bool separate = value_torso > 0;
          const std::vector<int64_t> value_hidden =
              value_torso == 2 ? std::vector<int64_t>{24, 40, 48} : std::vector<int64_t>{};
          const std::string what = std::string(continuous ? "gaussian" : "categorical") +
                                   (activation == Activation::kRelu ? " relu" : " tanh") +
                                   " rows " + std::to_string(rows) +
                                   (separate ? " separate value" : "") +
                                   (value_torso == 2 ? " [24, 40, 48]" : "");
          PolicyNet net = random_net(continuous, activation, 21, separate, value_hidden);
          PolicyNet ref = testing::float64_copy(net);
          const int64_t A = net->spec().actions;
          const at::Tensor obs = at::randn({rows, 2, 3});
          ASSERT_TRUE(fused_training_applies(*net, obs, kAuto)) << what;
          const at::Tensor gl = at::randn({rows, A}), gv = at::randn({rows}),
                           gs = at::randn({rows, A});
          const PolicyOutput fused = fused_forward(*net, obs);
          const PolicyOutput stock = ref->forward(obs.to(at::kDouble));
          EXPECT_LT(relative_error(fused.logits, stock.logits), 2e-5) << what << " logits";
          EXPECT_LT(relative_error(fused.value, stock.value), 2e-5) << what << " value";
          weighted_sum(fused, gl, gv, gs).backward();
          weighted_sum(stock, gl, gv, gs).backward();
          const auto fused_params = net->named_parameters();
          const auto ref_params = ref->named_parameters();
          for (const auto& item : ref_params) {
            const at::Tensor g = fused_params[item.key()].grad();
            ASSERT_TRUE(g.defined()) << what << " " << item.key() << " has no gradient";
            // float32 sums over up to 700 rows against float64.
            EXPECT_LT(relative_error(g, item.value().grad()), 1e-4) << what << " ∂" << item.key();
          }
          // One Adam step from these gradients: Δ = −lr·g/(|g| + eps) on a first
          // step, so a gradient error e moves a parameter by at most about
          // 2·lr·e/(|g| + eps): the bound below, per element.
          const double lr = 1e-3, eps = 1e-8;
          torch::optim::Adam fused_adam(net->parameters(), torch::optim::AdamOptions(lr).eps(eps));
          torch::optim::Adam ref_adam(ref->parameters(), torch::optim::AdamOptions(lr).eps(eps));
          std::vector<at::Tensor> before, grads;
          for (const auto& item : ref_params) {
            before.push_back(item.value().detach().clone());
            grads.push_back(item.value().grad().clone());
          }
          fused_adam.step();
          ref_adam.step();
          size_t i = 0;
          for (const auto& item : ref_params) {
            const at::Tensor moved = fused_params[item.key()].detach().to(at::kDouble);
            const at::Tensor g = grads[i].abs();
            const at::Tensor error = 1e-4 * g.max() + 1e-7;  // the gradient check's bound
            const at::Tensor allowed = 1e-6 + at::clamp_max(2 * lr * error / (g + eps), 2 * lr);
            EXPECT_TRUE(((moved - item.value().detach()).abs() <= allowed).all().item<bool>())
                << what << " Adam step of " << item.key();
            EXPECT_FALSE(at::equal(item.value().detach(), before[i])) << "the step moved nothing";
            ++i;
          }
          if (separate) {  // two layers of the policy's, the value torso's, the heads, log_std
            const size_t value_layers = value_hidden.empty() ? 2 : value_hidden.size();
            EXPECT_EQ(ref_params.size(), 2 * 2 + 2 * value_layers + 4 + (continuous ? 1 : 0))
                << "no value torso";
          }
        }
      }
    }
  }
}

// The backward pass adds into .grad itself: across two backward passes
// without zeroing, with the last rows' output gradients zero (as the
// learner's bootstrap row is) and with an output that reaches no loss.
TEST(FastMlpTrainTest, GradientsAccumulateSkipZeroRowsAndUnusedOutputs) {
  for (const std::string loss : {"both", "value only", "logits only"}) {
    for (bool separate : {false, true}) {
      PolicyNet net = random_net(false, Activation::kTanh, 23, separate);
      PolicyNet ref = testing::float64_copy(net);
      const int64_t rows = 90, A = net->spec().actions;
      for (int pass = 0; pass < 2; ++pass) {
        const at::Tensor obs = at::randn({rows, 2, 3});
        at::Tensor gl = at::randn({rows, A}), gv = at::randn({rows});
        gl.slice(0, rows - 30).zero_(), gv.slice(0, rows - 30).zero_();  // the last 30 rows
        gl[rows - 40].zero_(), gv[rows - 40] = 0.0f;  // a zero row before others is still a row
        const PolicyOutput fused = fused_forward(*net, obs);
        const PolicyOutput stock = ref->forward(obs.to(at::kDouble));
        auto reduce = [&](const PolicyOutput& out) {
          const at::Tensor l = (out.logits * gl.to(out.logits.scalar_type())).sum();
          const at::Tensor v = (out.value * gv.to(out.value.scalar_type())).sum();
          return loss == "both" ? l + v : loss == "value only" ? v : l;
        };
        reduce(fused).backward();
        reduce(stock).backward();
      }
      const auto fused_params = net->named_parameters();
      for (const auto& item : ref->named_parameters()) {
        const at::Tensor g = fused_params[item.key()].grad();
        if (separate && !item.value().grad().defined()) {
          // A whole MLP no loss reached (the value's own): no backward, no
          // gradient, as in LibTorch.
          EXPECT_FALSE(g.defined()) << loss << " " << item.key();
          continue;
        }
        ASSERT_TRUE(g.defined()) << loss << " " << item.key();
        // A head no loss reached has no gradient in LibTorch, zeros here.
        const at::Tensor want =
            item.value().grad().defined() ? item.value().grad() : at::zeros_like(item.value());
        EXPECT_LT(relative_error(g, want), 1e-4) << loss << " ∂" << item.key();
      }
    }
  }
}

TEST(FastMlpTrainTest, OffPixelsDoubleAndFrozenStayOnLibTorch) {
  PolicyNet net = random_net(false, Activation::kTanh, 22);
  const at::Tensor obs = at::randn({4, 2, 3});
  EXPECT_TRUE(fused_training_applies(*net, obs, kAuto));
  EXPECT_FALSE(fused_training_applies(*net, obs, ModelConfig::FastPath::kOff));
  EXPECT_FALSE(fused_training_applies(*net, obs.to(at::kDouble), kAuto));
  PolicyNet ref = testing::float64_copy(net);
  EXPECT_FALSE(fused_training_applies(*ref, obs.to(at::kDouble), kAuto));
  ModelSpec pixels;
  pixels.obs_shape = {1, 16, 16};
  pixels.pixels = true;
  pixels.actions = 2;
  PolicyNet cnn(pixels);
  EXPECT_FALSE(fused_training_applies(*cnn, at::rand({2, 1, 16, 16}), kAuto));
  // A frozen layer: the fused backward would write its .grad.
  net->parameters()[0].set_requires_grad(false);
  EXPECT_FALSE(fused_training_applies(*net, obs, kAuto));
}

}  // namespace
}  // namespace pronghorn
