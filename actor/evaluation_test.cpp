#include "actor/evaluation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "core/error.h"
#include "envs/env.h"

namespace pronghorn::actor {
namespace {

PolicyNet model_for(const Config& config, uint64_t seed) {
  torch::manual_seed(seed);
  EnvConfig one = config.env;
  one.num_envs = 1;
  return PolicyNet(model_spec_for(envs::make_env(one, 0)->spec(), config.model));
}

// K envs stepped the long way with `model`'s greedy actions: argmax of the
// logits row by row (each env resets by itself as its episode ends).
struct GreedyLoop {
  GreedyLoop(PolicyNet& policy, const EnvConfig& config, int64_t envs, uint64_t seed)
      : model(policy),
        k(envs),
        env(make(config, envs, seed)),
        obs(env->spec().obs_elements() * envs),
        rewards(envs),
        terminated(envs),
        truncated(envs),
        actions(envs) {
    env->reset(obs.data());
  }
  // One step of every env: rewards, terminated and truncated are then its.
  void step() {
    torch::NoGradGuard no_grad;
    const at::Tensor logits =
        model->forward(torch::from_blob(obs.data(), {k, env->spec().obs_elements()})).logits;
    for (int64_t i = 0; i < k; ++i) actions[i] = logits[i].argmax().item<int32_t>();
    env->step(actions.data(),
              {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
  }
  bool ended(int64_t i) const { return terminated[i] || truncated[i]; }

  static std::unique_ptr<envs::BatchEnv> make(const EnvConfig& config, int64_t k, uint64_t seed) {
    EnvConfig c = config;
    c.num_envs = k;
    return envs::make_env(c, seed);
  }

  PolicyNet& model;
  const int64_t k;
  std::unique_ptr<envs::BatchEnv> env;
  std::vector<float> obs, rewards;
  std::vector<uint8_t> terminated, truncated;
  std::vector<int32_t> actions;
};

// The greedy returns of `model` computed the long way: each env's first
// episode.
std::vector<double> first_episode_returns(PolicyNet& model, const EnvConfig& config, int64_t k,
                                          uint64_t seed) {
  GreedyLoop loop(model, config, k, seed);
  std::vector<double> sums(k, 0.0);
  std::vector<bool> ended(k, false);
  for (int64_t done = 0; done < k;) {
    loop.step();
    for (int64_t i = 0; i < k; ++i) {
      if (ended[i]) continue;
      sums[i] += loop.rewards[i];
      if (loop.ended(i)) {
        ended[i] = true;
        ++done;
      }
    }
  }
  return sums;
}

TEST(EvaluationTest, GreedyReturnsMatchAnIndependentLoop) {
  const Config config = load_config("", {});
  for (uint64_t weights : {1, 2, 3}) {
    PolicyNet model = model_for(config, weights);
    const Evaluation e = evaluate_policy(model, config.env, 8, true, 77);
    std::vector<double> expected = first_episode_returns(model, config.env, 8, 77);
    std::vector<double> got = e.returns;
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "weights " << weights;
    double mean = 0;
    for (double r : expected) mean += r / 8;
    EXPECT_NEAR(e.mean, mean, 1e-9);
    EXPECT_GE(e.env_steps, static_cast<uint64_t>(8 * e.max));
  }
}

TEST(EvaluationTest, GreedyIsRepeatableAndSamplingIsNot) {
  const Config config = load_config("", {"env.name=pendulum"});
  PolicyNet model = model_for(config, 5);
  const Evaluation a = evaluate_policy(model, config.env, 6, true, 9);
  torch::manual_seed(123);  // greedy draws nothing: the generator's state does not matter
  const Evaluation b = evaluate_policy(model, config.env, 6, true, 9);
  EXPECT_EQ(a.returns, b.returns);
  ASSERT_EQ(a.returns.size(), 6u);
  torch::manual_seed(1);
  const Evaluation s1 = evaluate_policy(model, config.env, 6, false, 9);
  torch::manual_seed(2);
  const Evaluation s2 = evaluate_policy(model, config.env, 6, false, 9);
  EXPECT_NE(s1.returns, s2.returns) << "sampled actions differ with the generator";
}

// The greedy returns of `model` over the first `n` episodes to start on K
// envs, computed the long way, in the order they ended; `steps`: the K-wide
// steps taken until the last of them ended.
std::vector<double> first_started_returns(PolicyNet& model, const EnvConfig& config, int64_t k,
                                          int64_t n, uint64_t seed, int64_t& steps) {
  GreedyLoop loop(model, config, k, seed);
  std::vector<double> sums(k, 0.0);
  std::vector<bool> counted(k, true);
  int64_t started = k;
  std::vector<double> returns;
  for (steps = 0; static_cast<int64_t>(returns.size()) < n; ++steps) {
    loop.step();
    for (int64_t i = 0; i < k; ++i) {
      sums[i] += loop.rewards[i];
      if (!loop.ended(i)) continue;
      if (counted[i]) returns.push_back(sums[i]);
      counted[i] = started < n;  // its next episode starts now
      started += counted[i] ? 1 : 0;
      sums[i] = 0;
    }
  }
  return returns;
}

// More episodes than envs: the first N to start count, each env starting
// its next counted episode as its last ends, and the evaluation ends with
// the last of them (no env waits for the others' episodes to end).
TEST(EvaluationTest, MoreEpisodesThanEnvsCountTheFirstToStart) {
  const Config config = load_config("", {});
  for (uint64_t weights : {4, 6}) {
    PolicyNet model = model_for(config, weights);
    const Evaluation e = evaluate_policy(model, config.env, 70, true, 3);  // 32 envs
    int64_t steps = 0;
    const std::vector<double> expected = first_started_returns(model, config.env, 32, 70, 3, steps);
    EXPECT_EQ(e.returns, expected) << "weights " << weights;
    EXPECT_EQ(e.env_steps, static_cast<uint64_t>(32 * steps)) << "weights " << weights;
    ASSERT_EQ(e.lengths.size(), 70u);
  }
}

// What the evaluation process writes, the learner reads back exactly.
TEST(EvaluationTest, ResultFileRoundTripsExactly) {
  Evaluation e;
  e.returns = {500, 0.1, -1e-300, 123.456789012345678};
  e.env_steps = 123456789012;
  summarise(e);
  const Evaluation back = parse_evaluation(format_evaluation(e));
  EXPECT_EQ(back.returns, e.returns);
  EXPECT_EQ(back.env_steps, e.env_steps);
  EXPECT_FALSE(back.cancelled);
  EXPECT_DOUBLE_EQ(back.mean, e.mean);
  EXPECT_DOUBLE_EQ(back.std, e.std);
  Evaluation cancelled;
  cancelled.cancelled = true;
  EXPECT_TRUE(parse_evaluation(format_evaluation(cancelled)).cancelled);
  EXPECT_THROW(parse_evaluation(""), Error);
  EXPECT_THROW(parse_evaluation("env_steps 3\ncancelled 0\nreturn x\n"), Error);
  EXPECT_THROW(parse_evaluation("env_steps 3\ncancelled 0\nreward 1\n"), Error);
}

}  // namespace
}  // namespace pronghorn::actor
