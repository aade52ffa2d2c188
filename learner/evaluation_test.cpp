#include "learner/evaluation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/files.h"
#include "envs/env.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"
#include "learner/evaluator.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;

PolicyNet model_for(const Config& config, uint64_t seed) {
  torch::manual_seed(seed);
  EnvConfig one = config.env;
  one.num_envs = 1;
  return PolicyNet(model_spec_for(envs::make_env(one, 0)->spec(), config.model));
}

// The greedy returns of `model` computed the long way: K envs, argmax of the
// logits row by row, each env's first episode.
std::vector<double> first_episode_returns(PolicyNet& model, const EnvConfig& config, int64_t k,
                                          uint64_t seed) {
  EnvConfig c = config;
  c.num_envs = k;
  auto env = envs::make_env(c, seed);
  const EnvSpec& spec = env->spec();
  std::vector<float> obs(spec.obs_elements() * k), rewards(k);
  std::vector<uint8_t> terminated(k), truncated(k);
  std::vector<int32_t> actions(k);
  std::vector<double> sums(k, 0.0);
  std::vector<bool> ended(k, false);
  env->reset(obs.data());
  torch::NoGradGuard no_grad;
  for (int64_t done = 0; done < k;) {
    const at::Tensor logits =
        model->forward(torch::from_blob(obs.data(), {k, spec.obs_elements()})).logits;
    for (int64_t i = 0; i < k; ++i) actions[i] = logits[i].argmax().item<int32_t>();
    env->step(actions.data(),
              {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
    for (int64_t i = 0; i < k; ++i) {
      if (ended[i]) continue;
      sums[i] += rewards[i];
      if (terminated[i] || truncated[i]) {
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

TEST(EvaluationTest, MoreEpisodesThanEnvsTakeSeveralRounds) {
  const Config config = load_config("", {});
  PolicyNet model = model_for(config, 4);
  const Evaluation e = evaluate_policy(model, config.env, 70, true, 3);  // 32 + 32 + 6
  EXPECT_EQ(e.returns.size(), 70u);
  // A greedy policy on CartPole from the same seed: the same 32 first
  // episodes in every round is not guaranteed (the envs' generators move on),
  // but every episode is one of CartPole's (1 to 500 steps).
  for (double r : e.returns) EXPECT_TRUE(r >= 1 && r <= 500) << r;
}

std::string fresh_folder(const char* what) {
  std::string dir = ::testing::TempDir() + "/eval-" + std::to_string(getpid()) + "-" + what;
  fs::remove_all(dir);
  return dir;
}

Checkpoint snapshot_of(PolicyNet& model, uint64_t env_steps) {
  Checkpoint c;
  c.counters.env_steps = env_steps;
  c.counters.learner_steps = env_steps / 100;
  c.counters.policy_version = c.counters.learner_steps + 1;
  c.parameters.resize(model->parameter_count());
  model->write_flat(c.parameters.data());
  c.parameter_layout = parameter_layout(*model);
  c.optimizer = "optimizer";
  c.rng = "rng";
  return c;
}

EvalReport wait_report(Evaluator& evaluator) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto r = evaluator.take()) return *r;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << "no evaluation within 60 s";
  return {};
}

TEST(EvaluatorTest, WritesBestOnlyOnImprovementAndAgreesWithEvaluatePolicy) {
  const Config config = load_config("", {"run.eval_episodes=5"});
  const EnvSpec spec = envs::make_env(EnvConfig{}, 0)->spec();
  const std::string folder = fresh_folder("best");
  const std::string best = folder + "/" + kBestCheckpointName;
  PolicyNet model = model_for(config, 11);
  {
    Evaluator evaluator(config, spec, folder);
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 1000)));
    EXPECT_FALSE(evaluator.start(snapshot_of(model, 2000))) << "one at a time";
    const EvalReport first = wait_report(evaluator);
    EXPECT_TRUE(first.new_best);
    EXPECT_EQ(first.env_steps, 1000u);
    const Evaluation direct = evaluate_policy(model, config.env, 5, true, evaluation_seed(1));
    EXPECT_EQ(first.result.returns, direct.returns) << "the run's seed and episodes";
    const Checkpoint written = load_checkpoint(best);
    EXPECT_EQ(written.counters.env_steps, 1000u);
    EXPECT_EQ(written.optimizer, "optimizer") << "a whole checkpoint";
    EXPECT_DOUBLE_EQ(recorded_best_return(folder), first.result.mean);

    // The same policy again is no improvement: best.ckpt keeps the first.
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 3000)));
    EXPECT_FALSE(wait_report(evaluator).new_best);
    EXPECT_EQ(load_checkpoint(best).counters.env_steps, 1000u);
  }
  // A resumed run knows the best so far: only a better evaluation replaces it.
  write_file_atomically(folder + "/best.json", "{\"eval_return_mean\": 1e9}\n");
  {
    Evaluator evaluator(config, spec, folder);
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 4000)));
    EXPECT_FALSE(wait_report(evaluator).new_best);
  }
  write_file_atomically(folder + "/best.json", "{\"eval_return_mean\": -1}\n");
  {
    Evaluator evaluator(config, spec, folder);
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 5000)));
    EXPECT_TRUE(wait_report(evaluator).new_best);
    EXPECT_EQ(load_checkpoint(best).counters.env_steps, 5000u);
  }
  fs::remove_all(folder);
}

TEST(EvaluatorTest, BestCheckpointOutlivesPruningAndIsNeverTheNewest) {
  const std::string folder = fresh_folder("prune");
  fs::create_directories(folder);
  PolicyNet model = model_for(load_config("", {}), 3);
  write_checkpoint_file(folder + "/" + kBestCheckpointName, snapshot_of(model, 100));
  for (uint64_t s = 2; s <= 6; ++s) save_checkpoint(folder, snapshot_of(model, s * 100), 2);
  EXPECT_TRUE(fs::exists(folder + "/" + kBestCheckpointName));
  EXPECT_EQ(load_checkpoint(folder + "/" + kBestCheckpointName).counters.env_steps, 100u);
  std::string newest;
  ASSERT_TRUE(load_newest_checkpoint(folder, &newest));
  EXPECT_EQ(fs::path(newest).filename(), checkpoint_file_name(600));
  EXPECT_EQ(checkpoint_candidates(folder).size(), 2u) << "the last 2, best.ckpt beside them";
  fs::remove_all(folder);
}

TEST(EvaluatorTest, DestructionCancelsALongEvaluation) {
  // 100000 episodes of CartPole would take minutes: destroying the
  // evaluator must not wait for them.
  const Config config = load_config("", {"run.eval_episodes=100000"});
  PolicyNet model = model_for(config, 1);
  const auto start = std::chrono::steady_clock::now();
  {
    Evaluator evaluator(config, envs::make_env(EnvConfig{}, 0)->spec(), fresh_folder("cancel"));
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 100)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(evaluator.busy());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace pronghorn::learner
