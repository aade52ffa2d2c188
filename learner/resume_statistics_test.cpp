// Running statistics a checkpoint carries besides the weights
// (loss.return_scaling, model.normalize_observations) come back on resume,
// and a checkpoint of the other setting is refused saying which.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/testing/error_of.h"
#include "learner/resume.h"
#include "learner/testing/resume_run.h"

namespace pronghorn::learner {
namespace {

using testing::fresh_folder;
using testing::Learner;
using testing::random_batch;
using testing::snapshot;

TEST(ResumeTest, ReturnScalingStatisticsComeBackWithTheCheckpoint) {
  const std::string dir = fresh_folder("return-stats");
  const std::vector<std::string> scaled = {"loss.return_scaling=true", "env.num_envs=8"};
  Learner original(scaled);
  Batch b = random_batch(1);
  b.actors = {0};  // one unroll of K = 8 envs
  original.trainer.learn(b, 0.0);
  Checkpoint c = snapshot(original, 1);
  c.return_stats = original.trainer.return_scaler()->stats();
  ASSERT_NE(*c.return_stats, ReturnStats{}) << "4 steps of 8 envs moved them";
  save_checkpoint(dir, c, 3);
  Learner resumed(scaled);
  resume_from_checkpoints(dir, resumed.trainer, resumed.config);
  EXPECT_EQ(resumed.trainer.return_scaler()->stats(), *c.return_stats);
  EXPECT_EQ(Learner().trainer.return_scaler(), nullptr) << "off by default";
}

// model.normalize_observations: into the learner and its model.
TEST(ResumeTest, ObservationStatisticsComeBackAndAMismatchIsRefused) {
  const std::string dir = fresh_folder("observation-stats");
  const std::vector<std::string> normalised = {"model.normalize_observations=true"};
  Learner original(normalised);
  original.trainer.learn(random_batch(2), 0.0);
  ASSERT_NE(original.trainer.observation_stats(), nullptr);
  Checkpoint c = snapshot(original, 1);
  c.observation_stats = *original.trainer.observation_stats();
  // Rows 1..T of the batch, each once (row 0 repeats the previous unroll's last).
  EXPECT_DOUBLE_EQ(c.observation_stats->count, kObservationPriorCount + 4 * 8);
  const at::Tensor rows = random_batch(2).obs.slice(0, 1).reshape({-1, 4}).to(at::kDouble);
  const at::Tensor want_mean = rows.sum(0) / (4 * 8 + kObservationPriorCount);
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(c.observation_stats->mean[j], want_mean[j].item<double>(), 1e-12) << j;
  }
  save_checkpoint(dir, c, 3);
  Learner resumed(normalised);
  resume_from_checkpoints(dir, resumed.trainer, resumed.config);
  EXPECT_EQ(*resumed.trainer.observation_stats(), *c.observation_stats);
  EXPECT_TRUE(at::equal(resumed.trainer.model()->observation_mean(),
                        original.trainer.model()->observation_mean()));
  EXPECT_TRUE(at::equal(resumed.trainer.model()->observation_var(),
                        original.trainer.model()->observation_var()));

  Learner plain;
  const std::string refused = pronghorn::testing::error_of(
      [&] { resume_from_checkpoints(dir, plain.trainer, plain.config); });
  EXPECT_NE(refused.find("holds observation statistics: the run that wrote it set "
                         "model.normalize_observations = true, which this run does not"),
            std::string::npos)
      << refused;
  const std::string plain_dir = fresh_folder("no-observation-stats");
  save_checkpoint(plain_dir, snapshot(plain, 1), 3);
  Learner wants(normalised);
  const std::string missing = pronghorn::testing::error_of(
      [&] { resume_from_checkpoints(plain_dir, wants.trainer, wants.config); });
  EXPECT_NE(missing.find("holds no observation statistics"), std::string::npos) << missing;
}

}  // namespace
}  // namespace pronghorn::learner
