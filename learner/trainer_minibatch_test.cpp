// Samples used more than once (learner.epochs, learner.minibatches): one
// epoch of one minibatch is exactly the single step; two epochs of two
// minibatches are the four optimizer steps a naive float64 reference takes
// by hand over the same columns (GAE once from the starting weights,
// advantages normalised per minibatch or by the batch's statistics, PPO's
// loss, clipping, Adam); and on a
// second pass PPO's clip cuts the policy gradient of the samples it clips;
// an LSTM's minibatch carries its columns' state and ended flags. The
// reference is learner/testing/minibatch_reference.h's; single steps
// (learner.shuffle = "steps") are trainer_steps_test.cpp's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "learner/testing/minibatch_reference.h"

namespace pronghorn::learner {
namespace {

using namespace pronghorn::learner::testing;

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
  expect_same_steps(t, start, reference.weights());
}

// loss.advantage_stats = "batch": every minibatch's advantages standardised
// by the mean and population std of the whole batch's, from the weights it
// started with, against the reference doing so in float64 (its own
// per-minibatch normalisation off).
TEST_P(TrainerMinibatchTest, BatchStatisticsStandardiseEveryMinibatchByTheWholeBatchs) {
  const std::vector<std::string> common = {"learner.epochs=2", "learner.minibatches=2",
                                           std::string("model.fast_path=") + GetParam()};
  std::vector<std::string> batch_stats = common;
  batch_stats.insert(batch_stats.end(),
                     {"loss.normalize_advantages=true", "loss.advantage_stats=batch"});
  const Batch b = random_batch(6, 16);
  torch::manual_seed(9);
  Trainer t(ppo_config(batch_stats), cartpole());
  Reference reference(ppo_config(common), 9);
  const std::vector<double> start = reference.weights();
  t.learn(b, 0.0);
  const auto [advantages, returns] = reference.gae(b);
  const at::Tensor standardised =
      (advantages - advantages.mean()) / (advantages.std(/*unbiased=*/false) + 1e-8);
  for (int64_t i = 0; i < t.steps_per_batch(); ++i) {
    reference.loss(b, t.minibatch(i), standardised, returns).backward();
    reference.step();
  }
  expect_same_steps(t, start, reference.weights());
}

// The same on V-trace, recomputed each step from the weights as they are:
// the statistics stay the starting weights' all batch long. The first step
// (starting weights, the whole batch) is the minibatch statistics' to the
// bit; the second, after the weights moved, is not.
TEST_P(TrainerMinibatchTest, BatchStatisticsOfVtraceAreTheStartingWeights) {
  const auto config = [&](const char* stats) {
    return load_config(
        "", {"learner.device=cpu", "loss.kind=ppo", "loss.advantages=vtrace", "learner.epochs=2",
             "loss.normalize_advantages=true", std::string("loss.advantage_stats=") + stats,
             std::string("model.fast_path=") + GetParam()});
  };
  const Batch b = random_batch(6, 17);
  torch::manual_seed(10);
  Trainer batch(config("batch"), cartpole());
  torch::manual_seed(10);
  Trainer minibatch(config("minibatch"), cartpole());
  batch.start_batch(b);
  minibatch.start_batch(b);
  for (int64_t step = 0; step < 2; ++step) {
    StepStats got = batch.backward_step(step), want = minibatch.backward_step(step);
    const std::vector<at::Tensor> g = gradients(batch), w = gradients(minibatch);
    bool same = true;
    for (size_t i = 0; i < g.size(); ++i) same = same && torch::equal(g[i], w[i]);
    EXPECT_EQ(same, step == 0) << "step " << step;
    batch.apply(got, 0.0);
    minibatch.apply(want, 0.0);
  }
}

// On the second pass the policy has moved off the actors' (behaviour)
// log-probs, so π/μ leaves [1 − ε, 1 + ε] for some samples; their policy
// gradient is exactly zero, and the trainer's gradient is the float64 one
// of the unclipped samples only. The step reports that fraction and the KL
// estimate as the reference computes them.
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
  // Its reported clip fraction and KL estimate, against the reference's
  // ratios; a float32 ratio on the edge may fall on the other side of it.
  // Two samples outside at least, so a fraction left at 0 cannot pass.
  const double samples = static_cast<double>(T * N);
  const double outside = ((ratio - 1).abs() > eps).to(at::kDouble).mean().item<double>();
  ASSERT_GE(outside * samples, 2) << "ratios " << ratio;
  EXPECT_NEAR(second.clip_fraction, outside, 1.0 / samples + 1e-12);
  // (r − 1) − log r in float32 cancels to about 1e-7 a sample.
  const double kl = ((ratio - 1) - ratio.log()).mean().item<double>();
  ASSERT_GT(kl, 1e-4);
  EXPECT_NEAR(second.approx_kl, kl, 1e-3 * kl + 1e-6);
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
