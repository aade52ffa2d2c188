// The LSTM core against the stock torch::nn::LSTM stepped over the same
// sequence, one step at a time, with the state zeroed by at::where where an
// episode ended; outputs, final state and every gradient in float64. And the
// policy's sequence forward (the learner's) against its one-step forward
// (the actor's) over the same steps.
#include "model/lstm_core.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <tuple>
#include <vector>

#include "model/policy.h"

namespace pronghorn {
namespace {

void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const at::Tensor error = (actual - expected).abs();
  EXPECT_TRUE(at::allclose(actual, expected, 1e-10, 1e-12))
      << what << ": largest difference " << error.max().item<double>() << " at flat index "
      << error.flatten().argmax().item<int64_t>();
}

struct Case {
  int64_t S, N, input, hidden;
  double ended_fraction;
};

class LstmCoreTest : public testing::TestWithParam<Case> {};

TEST_P(LstmCoreTest, MatchesStockLstmSteppedWithResetsGradientsIncluded) {
  const Case p = GetParam();
  torch::manual_seed(static_cast<uint64_t>(p.S * 131 + p.N));
  LstmCore core(p.input, p.hidden);
  core->to(at::kDouble);
  torch::nn::LSTM stock(torch::nn::LSTMOptions(p.input, p.hidden));
  stock->to(at::kDouble);
  {
    torch::NoGradGuard no_grad;
    for (const std::string name : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
      stock->named_parameters()[name + "_l0"].copy_(core->named_parameters()[name]);
    }
  }
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor x = at::randn({p.S, p.N, p.input}, f64);
  const at::Tensor h0 = at::randn({p.N, p.hidden}, f64), c0 = at::randn({p.N, p.hidden}, f64);
  const at::Tensor ended = at::rand({p.S - 1, p.N}).lt(p.ended_fraction).to(at::kByte);
  const at::Tensor w_out = at::randn({p.S, p.N, p.hidden}, f64);
  const at::Tensor w_h = at::randn({p.N, p.hidden}, f64), w_c = at::randn({p.N, p.hidden}, f64);

  // Ours: the whole sequence in one call.
  const at::Tensor x_ours = x.clone().requires_grad_(), h_ours = h0.clone().requires_grad_(),
                   c_ours = c0.clone().requires_grad_();
  CoreState state{h_ours, c_ours};
  const at::Tensor out = core->forward(x_ours, state, ended);
  ((out * w_out).sum() + (state.h * w_h).sum() + (state.c * w_c).sum()).backward();

  // Stock, one step per call, the state reset between calls.
  const at::Tensor x_ref = x.clone().requires_grad_(), h_ref = h0.clone().requires_grad_(),
                   c_ref = c0.clone().requires_grad_();
  at::Tensor h = h_ref.unsqueeze(0), c = c_ref.unsqueeze(0);  // [1, N, H]
  std::vector<at::Tensor> outputs;
  for (int64_t s = 0; s < p.S; ++s) {
    auto [y, hc] = stock->forward(x_ref.slice(0, s, s + 1), std::make_tuple(h, c));
    outputs.push_back(y[0]);
    std::tie(h, c) = hc;
    if (s + 1 < p.S) {
      const at::Tensor reset = ended[s].to(at::kBool).view({1, p.N, 1});
      h = at::where(reset, at::zeros_like(h), h);
      c = at::where(reset, at::zeros_like(c), c);
    }
  }
  const at::Tensor expected = at::stack(outputs);
  ((expected * w_out).sum() + (h[0] * w_h).sum() + (c[0] * w_c).sum()).backward();

  expect_close(out, expected, "outputs");
  expect_close(state.h, h[0], "final h");
  expect_close(state.c, c[0], "final c");
  expect_close(x_ours.grad(), x_ref.grad(), "d/dx");
  expect_close(h_ours.grad(), h_ref.grad(), "d/dh0");
  expect_close(c_ours.grad(), c_ref.grad(), "d/dc0");
  for (const std::string name : {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}) {
    expect_close(core->named_parameters()[name].grad(),
                 stock->named_parameters()[name + "_l0"].grad(), "d/d" + name);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LstmCoreTest,
                         testing::Values(Case{1, 1, 3, 2, 0.0}, Case{5, 7, 6, 4, 0.3},
                                         Case{17, 3, 5, 8, 0.0}, Case{9, 4, 2, 3, 1.0},
                                         Case{33, 16, 12, 32, 0.1}));

ModelSpec recurrent_spec() {
  ModelSpec spec;
  spec.obs_shape = {3};
  spec.actions = 2;
  spec.hidden = {8};
  spec.core_hidden = 5;
  return spec;
}

TEST(RecurrentPolicyTest, SequenceForwardEqualsStepsWithResetsGradientsIncluded) {
  torch::manual_seed(3);
  const int64_t S = 6, N = 4;
  PolicyNet net(recurrent_spec());
  net->to(at::kDouble);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor obs = at::randn({S, N, 3}, f64);
  const at::Tensor ended = at::rand({S - 1, N}).lt(0.3).to(at::kByte);
  const at::Tensor h0 = at::randn({N, 5}, f64), c0 = at::randn({N, 5}, f64);
  const at::Tensor w = at::randn({S * N, 2}, f64), wv = at::randn({S * N}, f64);
  auto gradients = [&] {
    std::vector<at::Tensor> g;
    for (const at::Tensor& q : net->parameters()) g.push_back(q.grad().clone());
    net->zero_grad();
    return g;
  };

  CoreState state{h0, c0};
  const PolicyOutput seq = net->forward_sequence(obs, state, ended);
  ((seq.logits * w).sum() + (seq.value * wv).sum()).backward();
  const std::vector<at::Tensor> seq_grads = gradients();

  // The actor's way: one step at a time, zeroing rows whose episode ended.
  CoreState step_state{h0, c0};
  std::vector<at::Tensor> logits, values;
  for (int64_t s = 0; s < S; ++s) {
    const PolicyOutput out = net->forward(obs[s], step_state);
    logits.push_back(out.logits);
    values.push_back(out.value);
    if (s + 1 < S) {
      const at::Tensor keep = ended[s].eq(0).to(at::kDouble).unsqueeze(1);
      step_state = {step_state.h * keep, step_state.c * keep};
    }
  }
  const at::Tensor step_logits = at::cat(logits), step_values = at::cat(values);
  ((step_logits * w).sum() + (step_values * wv).sum()).backward();
  const std::vector<at::Tensor> step_grads = gradients();

  expect_close(seq.logits, step_logits, "logits");
  expect_close(seq.value, step_values, "values");
  expect_close(state.h, step_state.h, "final h");
  ASSERT_EQ(seq_grads.size(), step_grads.size());
  for (size_t i = 0; i < seq_grads.size(); ++i) {
    expect_close(seq_grads[i], step_grads[i], "gradient of parameter " + std::to_string(i));
  }
}

TEST(RecurrentPolicyTest, CoreSitsBetweenTorsoAndHeadsAndFeedForwardIsUnchanged) {
  ModelSpec spec = recurrent_spec();
  PolicyNet recurrent(spec);
  const int64_t lstm = 4 * 5 * (8 + 5) + 2 * 4 * 5;  // weight_ih, weight_hh, two biases
  const int64_t torso = 3 * 8 + 8, heads = (5 * 2 + 2) + (5 + 1);
  EXPECT_EQ(recurrent->parameter_count(), torso + lstm + heads);
  EXPECT_TRUE(recurrent->recurrent());
  CoreState zero = recurrent->initial_state(7);
  EXPECT_EQ(zero.h.sizes(), (at::IntArrayRef{7, 5}));
  EXPECT_EQ(zero.c.abs().sum().item<double>(), 0.0);
  // A recurrent model has no stateless forward: calling it is a mistake.
  EXPECT_THROW(recurrent->forward(at::zeros({2, 3})), std::exception);

  spec.core_hidden = 0;
  PolicyNet plain(spec);
  EXPECT_FALSE(plain->recurrent());
  EXPECT_EQ(plain->parameter_count(), torso + (8 * 2 + 2) + (8 + 1));
  EXPECT_FALSE(plain->initial_state(7).h.defined());
}

}  // namespace
}  // namespace pronghorn
