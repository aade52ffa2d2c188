// The learner step refuses to apply a step whose loss is not finite.
#include "learner/trainer.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "envs/env.h"

namespace pronghorn::learner {
namespace {

// A batch of T steps of N CartPole envs with behaviour log-probs of a uniform
// policy; `reward` everywhere.
Batch cartpole_batch(int64_t T, int64_t N, float reward) {
  Batch b;
  b.obs = at::randn({T + 1, N, 4});
  b.actions = at::randint(0, 2, {T, N}, at::kLong);
  b.rewards = at::full({T, N}, reward);
  b.discounts = at::full({T, N}, 0.99f);
  b.truncated = at::zeros({T, N}, at::kByte);
  b.final_values = at::zeros({T, N});
  b.behaviour_log_probs = at::full({T, N}, std::log(0.5f));
  return b;
}

std::vector<float> weights(Trainer& t) {
  std::vector<float> flat(t.model()->parameter_count());
  t.model()->write_flat(flat.data());
  return flat;
}

EnvSpec cartpole() {
  for (const EnvSpec& s : envs::builtin_env_specs()) {
    if (s.name == "cartpole") return s;
  }
  throw Error("no cartpole");
}

TEST(TrainerTest, AFiniteStepUpdatesTheWeights) {
  Config c;
  Trainer t(c, cartpole());
  const std::vector<float> before = weights(t);
  const StepStats s = t.learn(cartpole_batch(4, 3, 1.0f), 0.0);
  EXPECT_TRUE(std::isfinite(s.total));
  EXPECT_NE(weights(t), before);
}

TEST(TrainerTest, ANonFiniteLossEndsTheStepNamingItAndLeavesTheWeights) {
  Config c;
  Trainer t(c, cartpole());
  const std::vector<float> before = weights(t);
  try {
    t.learn(cartpole_batch(4, 3, std::numeric_limits<float>::quiet_NaN()), 0.0);
    FAIL() << "a NaN loss was applied";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the loss is not finite"), std::string::npos) << e.what();
  }
  EXPECT_EQ(weights(t), before) << "the weights were not updated";
}

// A recurrent model learns from the state each unroll starts with: the step
// depends on the stored state and its gradients reach the core.
TEST(TrainerTest, ARecurrentStepRunsTheCoreFromTheStoredStateAndTrainsIt) {
  Config c;
  c.model.core = ModelConfig::Core::kLstm;
  c.model.core_hidden = 6;
  const int64_t T = 5, N = 3;
  Batch b = cartpole_batch(T, N, 1.0f);
  b.ended = at::zeros({T, N}, at::kByte);
  b.ended[2][1] = 1;
  b.core_state = at::zeros({2, N, 6});
  torch::manual_seed(4);
  Trainer from_zero(c, cartpole());
  torch::manual_seed(4);
  Trainer from_stored(c, cartpole());
  ASSERT_EQ(weights(from_zero), weights(from_stored));
  Batch stored = b;
  stored.core_state = at::randn({2, N, 6});
  const StepStats zero = from_zero.backward(b);
  const StepStats s = from_stored.backward(stored);
  EXPECT_NE(zero.total, s.total) << "the stored state was not used";
  // The same batch with no episode ended mid-unroll: the reset at step 2
  // changes what steps 3 and 4 see, so the loss differs.
  torch::manual_seed(4);
  Trainer no_reset(c, cartpole());
  Batch unended = stored;
  unended.ended = at::zeros({T, N}, at::kByte);
  EXPECT_NE(no_reset.backward(unended).total, s.total) << "the ended steps did not reset the core";
  for (const auto& p : from_stored.model()->named_parameters()) {
    if (p.key().rfind("core.", 0) != 0) continue;
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
  }
  Batch missing = b;
  missing.core_state = at::Tensor();
  EXPECT_THROW(from_zero.backward(missing), Error);
}

}  // namespace
}  // namespace pronghorn::learner
