// learner.shuffle = "steps": minibatches of single steps against the float64
// reference (learner/testing/minibatch_reference.h), and on a Gaussian head
// with value clipping, a pass's gradients against the whole batch's.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "envs/env.h"
#include "learner/testing/minibatch_reference.h"

namespace pronghorn::learner {
namespace {

using namespace pronghorn::learner::testing;

class TrainerStepsTest : public ::testing::TestWithParam<const char*> {};

// learner.shuffle = "steps" (standard PPO's minibatches): each pass permutes
// the T·N steps, each minibatch takes steps from any column and time, and
// two passes of three minibatches are the six steps the reference takes by
// hand on those steps.
TEST_P(TrainerStepsTest, ShuffledStepsAreMinibatchesOfSingleSteps) {
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
  expect_same_steps(t, start, reference.weights());
}

// A Gaussian head with loss.value_clip, summed losses: the gradients of one
// pass's minibatches of single steps add up to the whole batch's (the same
// weights, the same GAE), so every field a step takes (observations,
// actions, behaviour log-probs, advantages, targets, the log-std, the values
// clipped against) is the step's own.
TEST_P(TrainerStepsTest, ShuffledGaussianStepsAddUpToTheWholeBatch) {
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

INSTANTIATE_TEST_SUITE_P(FastPath, TrainerStepsTest, ::testing::Values("auto", "off"));

}  // namespace
}  // namespace pronghorn::learner
