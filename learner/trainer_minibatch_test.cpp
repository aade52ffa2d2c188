// Samples used more than once (learner.epochs, learner.minibatches): one
// epoch of one minibatch is exactly the single step; two epochs of two
// minibatches are the four optimizer steps a naive float64 reference takes
// by hand over the same columns (GAE once from the starting weights,
// advantages normalised per minibatch, PPO's loss, clipping, Adam); and on a
// second pass PPO's clip cuts the policy gradient of the samples it clips;
// an LSTM's minibatch carries its columns' state and ended flags; shuffled
// single steps (learner.shuffle = "steps") against the same reference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "envs/env.h"
#include "learner/testing/data_parallel_ranks.h"
#include "learner/trainer.h"

namespace pronghorn::learner {
namespace {

using namespace pronghorn::learner::testing;

Config ppo_config(const std::vector<std::string>& more) {
  std::vector<std::string> overrides = {"learner.device=cpu", "loss.kind=ppo",
                                        "loss.advantages=gae", "loss.gae_lambda=0.9"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return load_config("", overrides);
}

// The same initial weights as a Trainer made after torch::manual_seed(seed),
// in float64, stepped by hand.
struct Reference {
  Config c;
  PolicyNet net;
  std::vector<at::Tensor> m, v;  // Adam's moments
  int64_t steps = 0;

  Reference(const Config& config, uint64_t seed)
      : c(config), net((torch::manual_seed(seed), model_spec_for(cartpole(), config.model))) {
    net->to(at::kDouble);
    for (const at::Tensor& p : net->parameters()) {
      m.push_back(torch::zeros_like(p));
      v.push_back(torch::zeros_like(p));
    }
  }

  // Logits [T+1, N, A] and values [T+1, N] of `obs` [T+1, N, 4].
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& obs) {
    const int64_t rows = obs.size(0), N = obs.size(1);
    PolicyOutput out = net->forward(obs.to(at::kDouble).flatten(0, 1));
    return {out.logits.view({rows, N, -1}), out.value.view({rows, N})};
  }

  static at::Tensor log_pi(const at::Tensor& logits, const at::Tensor& actions) {
    return torch::log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1);
  }

  // GAE(λ) weighted by min(1, π/μ) as the kernel's (no time limits):
  // advantages and returns, [T, N].
  std::pair<at::Tensor, at::Tensor> gae(const Batch& b) {
    torch::NoGradGuard no_grad;
    const auto [logits, values] = forward(b.obs);
    const int64_t T = b.rewards.size(0);
    const at::Tensor rho = torch::clamp_max(torch::exp(log_pi(logits.slice(0, 0, T), b.actions) -
                                                       b.behaviour_log_probs.to(at::kDouble)),
                                            1.0);
    const at::Tensor r = b.rewards.to(at::kDouble), d = b.discounts.to(at::kDouble);
    at::Tensor advantages = torch::zeros_like(r);
    at::Tensor next = torch::zeros_like(r[0]);
    for (int64_t t = T - 1; t >= 0; --t) {
      const at::Tensor delta = r[t] + d[t] * values[t + 1] - values[t];
      next = rho[t] * delta + d[t] * c.loss.gae_lambda * rho[t] * next;
      advantages[t] = next;
    }
    return {advantages, values.slice(0, 0, T) + advantages};
  }

  // PPO's total loss on the columns `cols` of `b`, from given advantages.
  at::Tensor loss(const Batch& b, const at::Tensor& cols, const at::Tensor& advantages,
                  const at::Tensor& returns) {
    return loss_of(
        b, [&](const at::Tensor& t) { return t.index_select(1, cols); }, advantages, returns);
  }

  // The same on the single steps `picked` (t·N + n) of `b`.
  at::Tensor loss_on_steps(const Batch& b, const at::Tensor& picked, const at::Tensor& advantages,
                           const at::Tensor& returns) {
    return loss_of(
        b, [&](const at::Tensor& t) { return t.flatten(0, 1).index_select(0, picked); }, advantages,
        returns);
  }

  // PPO's total loss on the samples `take` picks out of [T, N, ...] tensors.
  template <typename Take>
  at::Tensor loss_of(const Batch& b, Take take, const at::Tensor& all_advantages,
                     const at::Tensor& returns) {
    const int64_t T = b.rewards.size(0);
    const auto [logits, values] = forward(b.obs);
    const at::Tensor head = take(logits.slice(0, 0, T));
    const at::Tensor ratio =
        torch::exp(log_pi(head, take(b.actions)) - take(b.behaviour_log_probs).to(at::kDouble));
    at::Tensor advantages = take(all_advantages);
    if (c.loss.normalize_advantages) {
      advantages = (advantages - advantages.mean()) / (advantages.std(false) + 1e-8);
    }
    const double eps = c.loss.ppo_clip;
    const at::Tensor policy =
        -torch::min(ratio * advantages, torch::clamp(ratio, 1 - eps, 1 + eps) * advantages).mean();
    const at::Tensor value = 0.5 * (take(returns) - take(values.slice(0, 0, T))).pow(2).mean();
    const at::Tensor entropy =
        -(torch::softmax(head, -1) * torch::log_softmax(head, -1)).sum(-1).mean();
    return policy + c.loss.baseline_cost * value - c.loss.entropy_cost * entropy;
  }

  // Gradient-norm clipping and one Adam step, as LibTorch's, by hand.
  void step() {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> params = net->parameters();
    double norm = 0;
    for (const at::Tensor& p : params) norm += p.grad().pow(2).sum().item<double>();
    norm = std::sqrt(norm);
    const double max = c.learner.max_grad_norm;  // 0: no clipping
    const double clip = max > 0 ? max / (norm + 1e-6) : 1.0;
    ++steps;
    const double lr = c.learner.learning_rate, b1 = 0.9, b2 = 0.999;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor g = params[i].grad() * std::min(1.0, clip);
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const at::Tensor m_hat = m[i] / (1 - std::pow(b1, steps));
      const at::Tensor v_hat = v[i] / (1 - std::pow(b2, steps));
      params[i] -= lr * m_hat / (v_hat.sqrt() + c.learner.adam_eps);
      params[i].mutable_grad().zero_();
    }
  }

  std::vector<double> weights() {
    std::vector<double> flat;
    for (const at::Tensor& p : net->parameters()) {
      const at::Tensor d = p.detach().contiguous();
      flat.insert(flat.end(), d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    }
    return flat;
  }
};

// Largest |a − b| over the flat weights.
double worst_difference(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

class TrainerMinibatchTest : public ::testing::TestWithParam<const char*> {};

// learn() with the defaults is backward() and apply() on the whole batch, to
// the bit, for the IMPALA loss and for PPO on GAE.
TEST_P(TrainerMinibatchTest, OneEpochOfOneMinibatchIsTheSingleStep) {
  const std::string fast = std::string("model.fast_path=") + GetParam();
  for (const Config& c : {load_config("", {"learner.device=cpu", fast}), ppo_config({fast})}) {
    const Batch b = random_batch(6, 11);
    torch::manual_seed(3);
    Trainer planned(c, cartpole());
    torch::manual_seed(3);
    Trainer single(c, cartpole());
    const StepStats s = planned.learn(b, 0.25);
    StepStats one = single.backward(b);
    single.apply(one, 0.25);
    EXPECT_EQ(weights(planned), weights(single));
    EXPECT_EQ(adam_state(planned), adam_state(single));
    EXPECT_EQ(s.total, one.total);
    EXPECT_EQ(s.grad_norm, one.grad_norm);
    EXPECT_EQ(s.optimizer_steps, 1);
  }
}

// Two passes of two minibatches: four optimizer steps, each on half the
// columns of that pass's permutation, against the reference doing the same.
TEST_P(TrainerMinibatchTest, TwoEpochsOfTwoMinibatchesAreFourStepsOverPermutedColumns) {
  const Config c =
      ppo_config({"learner.epochs=2", "learner.minibatches=2", "loss.normalize_advantages=true",
                  std::string("model.fast_path=") + GetParam()});
  const int64_t N = 6;
  const Batch b = random_batch(N, 12);
  torch::manual_seed(5);
  Trainer t(c, cartpole());
  Reference reference(c, 5);
  ASSERT_LT(worst_difference(weights(t), reference.weights()), 1e-7);
  const StepStats s = t.learn(b, 0.0);
  EXPECT_EQ(s.optimizer_steps, 4);
  ASSERT_EQ(t.steps_per_batch(), 4);

  // Each pass: its two minibatches are a permutation of the columns; the
  // passes draw different ones.
  std::vector<at::Tensor> passes;
  for (int64_t e = 0; e < 2; ++e) {
    const at::Tensor pass = torch::cat({t.minibatch(2 * e), t.minibatch(2 * e + 1)});
    EXPECT_TRUE(torch::equal(std::get<0>(pass.sort()), torch::arange(N))) << pass;
    passes.push_back(pass);
  }
  EXPECT_FALSE(torch::equal(passes[0], passes[1])) << "the same permutation twice";
  EXPECT_FALSE(torch::equal(passes[0], torch::arange(N))) << "the columns were not permuted";

  const std::vector<double> start = reference.weights();
  const auto [advantages, returns] = reference.gae(b);  // once, from the starting weights
  for (int64_t i = 0; i < 4; ++i) {
    reference.loss(b, t.minibatch(i), advantages, returns).backward();
    reference.step();
  }
  const std::vector<double> want = reference.weights();
  double moved = 0;
  for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - start[i]));
  EXPECT_GT(moved, 1e-3) << "the reference hardly moved: the comparison would say little";
  const double worst = worst_difference(weights(t), want);
  EXPECT_LT(worst, 2e-6) << "the weights moved by up to " << moved;
}

// learner.shuffle = "steps" (standard PPO's minibatches): each pass permutes
// the T·N steps, each minibatch takes steps from any column and time, and
// two passes of three minibatches are the six steps the reference takes by
// hand on those steps.
TEST_P(TrainerMinibatchTest, ShuffledStepsAreMinibatchesOfSingleSteps) {
  const Config c =
      ppo_config({"learner.epochs=2", "learner.minibatches=3", "learner.shuffle=steps",
                  "loss.normalize_advantages=true", "env.num_envs=3", "learner.batch_size=2",
                  "actor.unroll_length=5", std::string("model.fast_path=") + GetParam()});
  const int64_t N = 6, T = kT;
  const Batch b = random_batch(N, 16);
  torch::manual_seed(9);
  Trainer t(c, cartpole());
  Reference reference(c, 9);
  const StepStats s = t.learn(b, 0.0);
  EXPECT_EQ(s.optimizer_steps, 6);

  for (int64_t e = 0; e < 2; ++e) {
    const at::Tensor pass =
        torch::cat({t.minibatch(3 * e), t.minibatch(3 * e + 1), t.minibatch(3 * e + 2)});
    EXPECT_TRUE(torch::equal(std::get<0>(pass.sort()), torch::arange(T * N))) << pass;
  }
  // A minibatch of single steps mixes columns and times.
  const at::Tensor first = t.minibatch(0);
  EXPECT_GT(std::get<0>(at::_unique(first.remainder(N))).numel(), 1) << first;
  EXPECT_GT(std::get<0>(at::_unique(first.div(N, "floor"))).numel(), 1) << first;

  const std::vector<double> start = reference.weights();
  const auto [advantages, returns] = reference.gae(b);
  for (int64_t i = 0; i < 6; ++i) {
    reference.loss_on_steps(b, t.minibatch(i), advantages, returns).backward();
    reference.step();
  }
  const std::vector<double> want = reference.weights();
  double moved = 0;
  for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - start[i]));
  EXPECT_GT(moved, 1e-3) << "the reference hardly moved: the comparison would say little";
  EXPECT_LT(worst_difference(weights(t), want), 2e-6) << "the weights moved by up to " << moved;
}

// A Gaussian head with loss.value_clip, summed losses: the gradients of one
// pass's minibatches of single steps add up to the whole batch's (the same
// weights, the same GAE), so every field a step takes (observations,
// actions, behaviour log-probs, advantages, targets, the log-std, the values
// clipped against) is the step's own.
TEST_P(TrainerMinibatchTest, ShuffledGaussianStepsAddUpToTheWholeBatch) {
  EnvSpec pendulum;
  for (const EnvSpec& e : envs::builtin_env_specs()) {
    if (e.name == "pendulum") pendulum = e;
  }
  ASSERT_EQ(pendulum.action_kind, ActionKind::kContinuous);
  const int64_t N = 4, T = kT, D = pendulum.action_size;
  const std::vector<std::string> common = {"loss.reduction=sum",
                                           "loss.value_clip=0.2",
                                           "env.num_envs=2",
                                           "learner.batch_size=2",
                                           "actor.unroll_length=5",
                                           "model.log_std_init=-0.5",
                                           std::string("model.fast_path=") + GetParam()};
  std::vector<std::string> split = common, whole = common;
  split.insert(split.end(), {"learner.minibatches=4", "learner.shuffle=steps"});
  torch::manual_seed(17);
  Batch b;
  b.obs = torch::randn({T + 1, N, pendulum.obs_shape[0]});
  b.actions = torch::randn({T, N, D});
  b.rewards = torch::randn({T, N});
  b.discounts = torch::full({T, N}, 0.99f);
  b.truncated = torch::zeros({T, N}, torch::kByte);
  b.final_values = torch::zeros({T, N});
  b.behaviour_log_probs = -torch::rand({T, N}) - 0.5;
  torch::manual_seed(10);
  Trainer t(ppo_config(split), pendulum);
  torch::manual_seed(10);
  Trainer all(ppo_config(whole), pendulum);
  t.start_batch(b);
  std::vector<at::Tensor> summed;
  for (int64_t step = 0; step < 4; ++step) {
    ASSERT_EQ(t.minibatch(step).numel(), T * N / 4);
    t.backward_step(step);
    const std::vector<at::Tensor> g = gradients(t);
    if (summed.empty()) {
      for (const at::Tensor& x : g) summed.push_back(x.clone());
    } else {
      for (size_t i = 0; i < g.size(); ++i) summed[i] += g[i];
    }
  }
  all.backward(b);  // one step: GAE from its own forward, the same weights
  const std::vector<at::Tensor> want = gradients(all);
  ASSERT_EQ(summed.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const double scale = std::max(1e-6, want[i].abs().max().item<double>());
    EXPECT_LT((summed[i] - want[i]).abs().max().item<double>() / scale, 1e-4) << "parameter " << i;
  }
}

// On the second pass the policy has moved off the actors' (behaviour)
// log-probs, so π/μ leaves [1 − ε, 1 + ε] for some samples; their policy
// gradient is exactly zero, and the trainer's gradient is the float64 one
// of the unclipped samples only.
TEST_P(TrainerMinibatchTest, TheSecondPassClipsAndClippedSamplesHaveNoPolicyGradient) {
  const Config c =
      ppo_config({"learner.epochs=2", "learner.learning_rate=0.05", "loss.baseline_cost=0",
                  "loss.entropy_cost=0", "loss.ppo_clip=0.1", "learner.max_grad_norm=0",
                  std::string("model.fast_path=") + GetParam()});
  const int64_t N = 16;
  Batch b = random_batch(N, 13);
  torch::manual_seed(6);
  Trainer t(c, cartpole());
  Reference reference(c, 6);
  t.start_batch(b);
  StepStats first = t.backward_step(0);
  t.apply(first, 0.0);
  const auto [advantages, returns] = reference.gae(b);
  reference.loss(b, t.minibatch(0), advantages, returns).backward();
  reference.step();

  // Which samples the second pass clips, by the reference's weights.
  const int64_t T = b.rewards.size(0);
  at::Tensor ratio;
  {
    torch::NoGradGuard no_grad;
    const at::Tensor logits = reference.forward(b.obs).first.slice(0, 0, T);
    ratio =
        torch::exp(Reference::log_pi(logits, b.actions) - b.behaviour_log_probs.to(at::kDouble));
  }
  const double eps = c.loss.ppo_clip;
  const at::Tensor clipped = torch::logical_or(torch::logical_and(advantages > 0, ratio > 1 + eps),
                                               torch::logical_and(advantages < 0, ratio < 1 - eps));
  const int64_t count = clipped.sum().item<int64_t>();
  ASSERT_GT(count, 0) << "nothing clipped on the second pass: ratios " << ratio;
  ASSERT_LT(count, T * N) << "everything clipped: no gradient left to compare";

  // The float64 policy gradient of the clipped samples alone: exactly zero.
  const std::vector<at::Tensor> params = reference.net->parameters();
  const at::Tensor all = torch::arange(N);
  const at::Tensor clipped_advantages =
      torch::where(clipped, advantages, torch::zeros_like(advantages));
  reference.loss(b, all, clipped_advantages, returns).backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].grad().abs().max().item<double>(), 0.0) << "parameter " << i;
    params[i].mutable_grad().zero_();
  }
  // The whole second-pass gradient: the trainer's against the reference's.
  StepStats second = t.backward_step(1);
  EXPECT_TRUE(std::isfinite(second.total));
  reference.loss(b, all, advantages, returns).backward();
  // One scale for all (the value head has no gradient here).
  std::vector<at::Tensor> got, want;
  for (const at::Tensor& g : gradients(t)) got.push_back(g.flatten().to(at::kDouble));
  for (const at::Tensor& p : params) want.push_back(p.grad().flatten());
  const at::Tensor got_all = torch::cat(got), want_all = torch::cat(want);
  const double scale = want_all.abs().max().item<double>();
  ASSERT_GT(scale, 0);
  EXPECT_LT((got_all - want_all).abs().max().item<double>() / scale, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(FastPath, TrainerMinibatchTest, ::testing::Values("auto", "off"));

TEST(TrainerPlanTest, ABatchItsMinibatchesDoNotDivideIsRefused) {
  Trainer t(ppo_config({"learner.minibatches=4"}), cartpole());
  try {
    t.start_batch(random_batch(6, 14));
    FAIL() << "6 columns split in 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("learner.minibatches = 4"), std::string::npos) << e.what();
  }
  // Single steps: 5 × 6 = 30 steps split in 4 (a batch of another shape
  // than the config's, as a remote actor's could be).
  Trainer steps(ppo_config({"learner.minibatches=4", "learner.shuffle=steps"}), cartpole());
  try {
    steps.start_batch(random_batch(6, 14));
    FAIL() << "30 steps split in 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("30 steps"), std::string::npos) << e.what();
  }
}

// An LSTM's minibatch carries its columns' stored state and ended flags: its
// step is the single step on those columns alone.
TEST(TrainerPlanTest, ARecurrentMinibatchCarriesItsColumnsStateAndEnds) {
  const std::vector<std::string> lstm = {"learner.device=cpu", "model.core=lstm",
                                         "model.core_hidden=6"};
  std::vector<std::string> split = lstm;
  split.push_back("learner.minibatches=2");
  const int64_t N = 6;
  Batch b = random_batch(N, 15);
  b.ended = (torch::rand({kT, N}) < 0.3).to(at::kByte);
  b.core_state = torch::randn({2, N, 6});
  torch::manual_seed(8);
  Trainer t(load_config("", split), cartpole());
  torch::manual_seed(8);
  Trainer single(load_config("", lstm), cartpole());
  t.start_batch(b);
  for (int64_t step = 0; step < 2; ++step) {
    const at::Tensor cols = t.minibatch(step);
    ASSERT_EQ(cols.numel(), N / 2);
    Batch part;
    part.obs = b.obs.index_select(1, cols);
    part.actions = b.actions.index_select(1, cols);
    part.rewards = b.rewards.index_select(1, cols);
    part.discounts = b.discounts.index_select(1, cols);
    part.truncated = b.truncated.index_select(1, cols);
    part.final_values = b.final_values.index_select(1, cols);
    part.behaviour_log_probs = b.behaviour_log_probs.index_select(1, cols);
    part.ended = b.ended.index_select(1, cols);
    part.core_state = b.core_state.index_select(1, cols);
    const StepStats got = t.backward_step(step);
    const StepStats want = single.backward(part);
    EXPECT_EQ(got.total, want.total) << "step " << step;
    const std::vector<at::Tensor> g = gradients(t), w = gradients(single);
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_TRUE(torch::equal(g[i], w[i])) << "step " << step << ", parameter " << i;
    }
  }
}

}  // namespace
}  // namespace pronghorn::learner
