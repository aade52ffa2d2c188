// The learner's evaluator against real evaluation processes of the
// pronghorn binary (PRONGHORN_BIN): best.ckpt and best.json, the returns
// `pronghorn eval`'s function gives, cancellation.
#include "learner/evaluator.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "core/files.h"
#include "envs/env.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;
using actor::evaluate_policy;
using actor::Evaluation;
using actor::evaluation_seed;

PolicyNet model_for(const Config& config, uint64_t seed) {
  torch::manual_seed(seed);
  EnvConfig one = config.env;
  one.num_envs = 1;
  return PolicyNet(model_spec_for(envs::make_env(one, 0)->spec(), config.model));
}

std::string fresh_folder(const char* what) {
  std::string dir = ::testing::TempDir() + "/eval-" + std::to_string(getpid()) + "-" + what;
  fs::remove_all(dir);
  return dir;
}

// An evaluator of `config` as a run has one: the config written beside its
// checkpoints folder.
struct EvaluatorOf {
  explicit EvaluatorOf(const Config& config, const std::string& folder)
      : config_path(write_config(config, folder)),
        evaluator(config, config_path, folder, PRONGHORN_BIN) {}
  static std::string write_config(const Config& config, const std::string& folder) {
    const std::string path = folder + ".config.toml";
    write_file_atomically(path, to_toml(config));
    return path;
  }
  std::string config_path;
  Evaluator evaluator;
};

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
  const std::string folder = fresh_folder("best");
  const std::string best = folder + "/" + kBestCheckpointName;
  PolicyNet model = model_for(config, 11);
  {
    EvaluatorOf of(config, folder);
    Evaluator& evaluator = of.evaluator;
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
    EvaluatorOf of(config, folder);
    Evaluator& evaluator = of.evaluator;
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 4000)));
    EXPECT_FALSE(wait_report(evaluator).new_best);
  }
  write_file_atomically(folder + "/best.json", "{\"eval_return_mean\": -1}\n");
  {
    EvaluatorOf of(config, folder);
    Evaluator& evaluator = of.evaluator;
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

// An evaluation process that fails (here a program that only exits 1) is an
// Error from take() naming the env and how the process ended: the learner
// ends the job with it.
TEST(EvaluatorTest, AFailedEvaluationProcessIsAnErrorNamingTheEnv) {
  const Config config = load_config("", {"run.eval_episodes=5"});
  const std::string folder = fresh_folder("failed");
  PolicyNet model = model_for(config, 2);
  Evaluator evaluator(config, EvaluatorOf::write_config(config, folder), folder, "/bin/false");
  ASSERT_TRUE(evaluator.start(snapshot_of(model, 700)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string error;
  while (error.empty() && std::chrono::steady_clock::now() < deadline) {
    try {
      if (evaluator.take()) ADD_FAILURE() << "a report from a failed evaluation";
    } catch (const Error& e) {
      error = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(error.starts_with("the evaluation process (pid ")) << error;
  EXPECT_NE(error.find(") exited 1; env cartpole, 5 envs at once (run.eval_episodes = 5), "
                       "evaluating the policy at 700 env steps"),
            std::string::npos)
      << error;
  EXPECT_FALSE(fs::exists(folder + "/evaluating.ckpt")) << "its snapshot is removed";
  EXPECT_FALSE(fs::exists(folder + "/" + kBestCheckpointName));
  fs::remove_all(folder);
}

TEST(EvaluatorTest, DestructionCancelsALongEvaluation) {
  // 100000 episodes of CartPole would take minutes: destroying the
  // evaluator must not wait for them.
  const Config config = load_config("", {"run.eval_episodes=100000"});
  PolicyNet model = model_for(config, 1);
  const auto start = std::chrono::steady_clock::now();
  {
    EvaluatorOf of(config, fresh_folder("cancel"));
    Evaluator& evaluator = of.evaluator;
    ASSERT_TRUE(evaluator.start(snapshot_of(model, 100)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(evaluator.busy());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace pronghorn::learner
