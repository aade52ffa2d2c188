// The fused MLP path (model/fast_mlp.h) against the stock PolicyNet run in
// float64: outputs, log-probs, greedy actions, and the distribution of
// sampled actions (statistical tests with fixed seeds; each states its false
// positive rate, the chance that a correct sampler fails it for a seed).
#include "model/fast_mlp.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/testing/float64_copy.h"

namespace pronghorn {
namespace {

using Activation = ModelConfig::Activation;
constexpr auto kAuto = ModelConfig::FastPath::kAuto;

struct Case {
  bool continuous;
  Activation activation;
  bool separate_value = false;             // the value head on a torso of its own
  std::vector<int64_t> value_hidden = {};  // its widths (model.value_hidden); empty: hidden's
  std::string name() const {
    std::string name = std::string(continuous ? "gaussian" : "categorical") +
                       (activation == Activation::kRelu ? "_relu" : "_tanh") +
                       (separate_value ? "_separate_value" : "");
    for (int64_t w : value_hidden) name += "_" + std::to_string(w);
    return name;
  }
};

// The last two: a value torso deeper and wider than the policy's [32, 16],
// then one narrower, so that a value head read at the policy's width fails.
const Case kCases[] = {{false, Activation::kTanh},
                       {false, Activation::kRelu},
                       {true, Activation::kTanh},
                       {true, Activation::kRelu},
                       {false, Activation::kTanh, true},
                       {true, Activation::kRelu, true},
                       {true, Activation::kTanh, true, {24, 40, 48}},
                       {false, Activation::kRelu, true, {8}}};

EnvSpec env_for(const Case& c) {
  EnvSpec env;
  env.name = "test";
  env.obs_shape = {2, 3};  // flattened to 6 by both paths
  env.action_kind = c.continuous ? ActionKind::kContinuous : ActionKind::kDiscrete;
  env.action_size = c.continuous ? 3 : 5;
  if (c.continuous) {
    env.action_low = {-1.0f, -0.5f, -2.0f};
    env.action_high = {1.0f, 0.5f, 2.0f};
  }
  return env;
}

// A PolicyNet with every parameter drawn at random (its own initialisation
// makes the policy near uniform, which would hide a wrong head), scaled so
// that probabilities stay between about 0.01 and 0.9.
PolicyNet random_net(const Case& c, const EnvSpec& env, uint64_t seed) {
  ModelConfig config;
  config.hidden = {32, 16};
  config.activation = c.activation;
  config.separate_value = c.separate_value;
  config.value_hidden = c.value_hidden;
  torch::manual_seed(static_cast<int64_t>(seed));
  PolicyNet net(model_spec_for(env, config));
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : net->parameters()) p.copy_(at::randn_like(p) * 0.4);
  return net;
}

// The reference: the same module, in float64.
PolicyOutput reference(PolicyNet& net, const at::Tensor& obs) {
  PolicyNet copy = testing::float64_copy(net);
  torch::NoGradGuard no_grad;
  return copy->forward(obs.to(at::kDouble));
}

std::unique_ptr<FastMlp> fast_for(PolicyNet& net, const EnvSpec& env, uint64_t seed) {
  auto fast = FastMlp::make_for(*net, env, kAuto, seed);
  EXPECT_NE(fast, nullptr);
  return fast;
}

// |a − b| ≤ 2e-5 (1 + |b|): float32 products over 32 terms and fast_tanh's
// 3e-7 error stay well inside; a wrong weight, bias or layout does not.
void expect_close(double a, double b, const std::string& what) {
  EXPECT_LE(std::abs(a - b), 2e-5 * (1 + std::abs(b))) << what << ": fused " << a << ", ref " << b;
}

TEST(FastMlpTest, OutputsMatchPolicyNetInFloat64) {
  for (const Case& c : kCases) {
    const EnvSpec env = env_for(c);
    PolicyNet net = random_net(c, env, 11);
    auto fast = fast_for(net, env, 1);
    for (int64_t rows : {1, 7, 300}) {  // 300: more than one block of the head loops
      const at::Tensor obs = at::randn({rows, 2, 3});
      fast->forward(obs.data_ptr<float>(), rows);
      const PolicyOutput ref = reference(net, obs);
      const auto logits = ref.logits.accessor<double, 2>();
      const auto value = ref.value.accessor<double, 1>();
      for (int64_t r = 0; r < rows; ++r) {
        const std::string at_row =
            c.name() + " rows " + std::to_string(rows) + " row " + std::to_string(r);
        for (int64_t a = 0; a < env.action_size; ++a) {
          expect_close(fast->logit(r, a), logits[r][a], at_row + " logit " + std::to_string(a));
        }
        expect_close(fast->value(r), value[r], at_row + " value");
      }
      std::vector<float> values(rows);
      fast->values(obs.data_ptr<float>(), rows, values.data());
      for (int64_t r = 0; r < rows; ++r) expect_close(values[r], value[r], c.name() + " values()");
    }
    if (c.continuous) {
      for (int64_t d = 0; d < env.action_size; ++d) {
        expect_close(fast->log_std(d), net->named_parameters()["log_std"][d].item<double>(),
                     "log_std");
      }
    }
  }
}

TEST(FastMlpTest, LogProbsAndGreedyActionsMatchPolicyNetInFloat64) {
  const int64_t rows = 300;
  for (const Case& c : kCases) {
    const EnvSpec env = env_for(c);
    PolicyNet net = random_net(c, env, 12);
    auto fast = fast_for(net, env, 2);
    const at::Tensor obs = at::randn({rows, 2, 3});
    const PolicyOutput ref = reference(net, obs);
    const int64_t D = env.action_size;
    for (bool greedy : {false, true}) {
      std::vector<int32_t> discrete(rows);
      std::vector<float> sample(rows * D), clipped(rows * D), log_probs(rows);
      ActionsOut into{.log_probs = log_probs.data()};
      if (c.continuous) {
        into.continuous = sample.data(), into.clipped = clipped.data();
      } else {
        into.discrete = discrete.data();
      }
      fast->act(obs.data_ptr<float>(), rows, env, greedy, into);
      const std::string what = c.name() + (greedy ? " greedy" : " sampled");
      at::Tensor ref_log_probs;
      if (c.continuous) {
        const at::Tensor x = at::from_blob(sample.data(), {rows, D}).to(at::kDouble);
        ref_log_probs = gaussian_log_prob(x, ref.logits, ref.log_std);
        if (greedy) {
          EXPECT_TRUE(at::allclose(x, ref.logits, 2e-5, 2e-5)) << what;
        }
        for (int64_t i = 0; i < rows * D; ++i) {
          EXPECT_EQ(clipped[i],
                    std::clamp(sample[i], env.action_low[i % D], env.action_high[i % D]))
              << what << " clipped " << i;
        }
      } else {
        const at::Tensor taken = at::from_blob(discrete.data(), {rows, 1}, at::kInt).to(at::kLong);
        ASSERT_TRUE((taken >= 0).all().item<bool>() && (taken < D).all().item<bool>()) << what;
        ref_log_probs = at::log_softmax(ref.logits, -1).gather(-1, taken).squeeze(-1);
        if (greedy) {  // the most likely action, up to float32's rounding of near ties
          const at::Tensor gap = ref.logits.amax(-1) - ref.logits.gather(-1, taken).squeeze(-1);
          EXPECT_LE(gap.max().item<double>(), 1e-5) << what;
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        expect_close(log_probs[r], ref_log_probs[r].item<double>(),
                     what + " log-prob row " + std::to_string(r));
      }
    }
  }
}

// The chi-square quantile of `df` degrees of freedom exceeded with
// probability 1e-6 (Wilson–Hilferty; within 1% for df ≥ 3).
double chi_square_critical(int64_t df) {
  const double k = static_cast<double>(df), z = 4.7534;  // the normal's 1 − 1e-6 quantile
  const double t = 1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k));
  return k * t * t * t;
}

// Pearson's chi-square of the counts of actions sampled for `obs` (rows in
// blocks of M copies of each of `distinct` observations) against `probs`.
double chi_square(const std::vector<int32_t>& taken, const at::Tensor& probs, int64_t distinct,
                  int64_t M) {
  const int64_t A = probs.size(1);
  double chi2 = 0;
  for (int64_t o = 0; o < distinct; ++o) {
    std::vector<double> counts(A, 0);
    for (int64_t m = 0; m < M; ++m) counts[taken[o * M + m]] += 1;
    for (int64_t a = 0; a < A; ++a) {
      const double expected = M * probs[o][a].item<double>();
      EXPECT_GE(expected, 5) << "too few expected for the chi-square approximation";
      chi2 += (counts[a] - expected) * (counts[a] - expected) / expected;
    }
  }
  return chi2;
}

// 6 observations × 20 000 samples each, 5 actions: Pearson's chi-square over
// the 24 degrees of freedom against the float64 reference's softmax, failing
// above its 1 − 1e-6 quantile (false positive rate 1e-6 per seed). The same
// counts against a policy with one logit moved by 0.1 must fail it: the test
// has the power to see an error of that size.
TEST(FastMlpTest, SampledActionsFollowTheSoftmaxOfPolicyNet) {
  const int64_t distinct = 6, M = 20000;
  for (Activation activation : {Activation::kTanh, Activation::kRelu}) {
    const Case c{false, activation};
    const EnvSpec env = env_for(c);
    PolicyNet net = random_net(c, env, 13);
    auto fast = fast_for(net, env, 3);
    const at::Tensor obs = at::randn({distinct, 1, 2, 3}).expand({distinct, M, 2, 3}).contiguous();
    std::vector<int32_t> taken(distinct * M);
    fast->act(obs.data_ptr<float>(), distinct * M, env, false, {.discrete = taken.data()});
    const at::Tensor logits = reference(net, obs.select(1, 0)).logits;
    const double limit = chi_square_critical(distinct * (env.action_size - 1));
    EXPECT_LT(chi_square(taken, at::softmax(logits, -1), distinct, M), limit) << c.name();
    at::Tensor shifted = logits.clone();
    shifted.select(1, 0).add_(0.1);
    EXPECT_GT(chi_square(taken, at::softmax(shifted, -1), distinct, M), limit)
        << c.name() << ": the test cannot tell a 0.1 logit error";
  }
}

// 4 observations × 20 000 samples, D = 3: z = (x − μ) / σ with the float64
// reference's μ and σ must be standard normal and independent across
// dimensions. Per (observation, dimension) the mean and variance of z, and
// per pair of dimensions the mean of z_i z_j, each within 5.45 standard
// errors (two-sided 5e-8 each, 48 such checks), and a Kolmogorov–Smirnov
// statistic of all 240 000 z below 2.75 (1e-6): together a false positive
// rate below 4e-6 per seed.
TEST(FastMlpTest, SampledGaussianActionsFollowPolicyNetsMeanAndStd) {
  const int64_t distinct = 4, M = 20000;
  for (Activation activation : {Activation::kTanh, Activation::kRelu}) {
    const Case c{true, activation};
    const EnvSpec env = env_for(c);
    const int64_t D = env.action_size;
    PolicyNet net = random_net(c, env, 14);
    auto fast = fast_for(net, env, 4);
    const at::Tensor obs = at::randn({distinct, 1, 2, 3}).expand({distinct, M, 2, 3}).contiguous();
    std::vector<float> sample(distinct * M * D), clipped(distinct * M * D);
    fast->act(obs.data_ptr<float>(), distinct * M, env, false,
              {.continuous = sample.data(), .clipped = clipped.data()});
    const PolicyOutput ref = reference(net, obs.select(1, 0));
    const at::Tensor x = at::from_blob(sample.data(), {distinct, M, D}).to(at::kDouble);
    const at::Tensor z = (x - ref.logits.unsqueeze(1)) / ref.log_std.exp().unsqueeze(1);
    const double se = 1 / std::sqrt(static_cast<double>(M)), k = 5.45;
    for (int64_t o = 0; o < distinct; ++o) {
      for (int64_t d = 0; d < D; ++d) {
        const at::Tensor zd = z[o].select(1, d);
        EXPECT_LT(std::abs(zd.mean().item<double>()), k * se) << c.name() << " mean " << o << d;
        // Var of z² is 2 for a standard normal.
        EXPECT_LT(std::abs((zd * zd).mean().item<double>() - 1), k * se * std::sqrt(2.0))
            << c.name() << " variance " << o << d;
        for (int64_t e = d + 1; e < D; ++e) {
          EXPECT_LT(std::abs((zd * z[o].select(1, e)).mean().item<double>()), k * se)
              << c.name() << " correlation " << o << d << e;
        }
      }
    }
    const at::Tensor sorted = std::get<0>(z.flatten().sort());
    const int64_t n = sorted.numel();
    const at::Tensor cdf = 0.5 * at::erfc(-sorted / std::sqrt(2.0));
    const at::Tensor i = at::arange(n, at::kDouble);
    const double ks = at::max(at::maximum((i + 1) / n - cdf, cdf - i / n)).item<double>();
    EXPECT_LT(ks * std::sqrt(static_cast<double>(n)), 2.75) << c.name();
  }
}

TEST(FastMlpTest, AutoTakesOnlyMlpsOnFloatObservationsAndOffTakesNone) {
  const Case c{false, Activation::kTanh};
  EnvSpec env = env_for(c);
  PolicyNet net = random_net(c, env, 15);
  EXPECT_EQ(FastMlp::make_for(*net, env, ModelConfig::FastPath::kOff, 1), nullptr);
  EXPECT_NE(FastMlp::make_for(*net, env, kAuto, 1), nullptr);
  env.obs_dtype = Dtype::kUInt8;  // LibTorch scales bytes; the fused path reads floats
  EXPECT_EQ(FastMlp::make_for(*net, env, kAuto, 1), nullptr);
  env.obs_dtype = Dtype::kFloat32;
  env.obs_shape = {1, 32, 32};
  ModelConfig cnn;
  cnn.kind = ModelConfig::Kind::kImpalaCnn;
  PolicyNet pixels(model_spec_for(env, cnn));
  EXPECT_EQ(FastMlp::make_for(*pixels, env, kAuto, 1), nullptr);
}

TEST(FastMlpTest, SameSeedSameActionsAndLoadFollowsNewWeights) {
  const Case c{false, Activation::kTanh};
  const EnvSpec env = env_for(c);
  PolicyNet net = random_net(c, env, 16);
  auto a = fast_for(net, env, 7), b = fast_for(net, env, 7);
  const at::Tensor obs = at::randn({64, 2, 3});
  std::vector<int32_t> first(64), second(64);
  a->act(obs.data_ptr<float>(), 64, env, false, {.discrete = first.data()});
  b->act(obs.data_ptr<float>(), 64, env, false, {.discrete = second.data()});
  EXPECT_EQ(first, second);
  // New weights through the flat layout the weight slab carries.
  PolicyNet other = random_net(c, env, 17);
  std::vector<float> flat(other->parameter_count());
  other->write_flat(flat.data());
  a->load(flat.data());
  a->forward(obs.data_ptr<float>(), 64);
  const PolicyOutput ref = reference(other, obs);
  for (int64_t r = 0; r < 64; ++r) expect_close(a->value(r), ref.value[r].item<double>(), "value");
}

}  // namespace
}  // namespace pronghorn
