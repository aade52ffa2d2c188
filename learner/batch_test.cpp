#include "learner/batch.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace pronghorn::learner {
namespace {

// loss.reward_clip clips before loss.reward_scale scales; the env's rewards
// (what returns are reported from) stay as they were.
TEST(TrainingRewardsTest, ClipsToTheBoundThenScales) {
  const at::Tensor env = at::tensor({-3.0f, -1.0f, -0.5f, 0.0f, 0.2f, 1.0f, 7.0f}).view({7, 1});
  const at::Tensor before = env.clone();
  LossConfig loss;
  loss.reward_clip = 1.0;
  loss.reward_scale = 0.5;
  EXPECT_TRUE(at::equal(training_rewards(env, loss),
                        at::tensor({-0.5f, -0.5f, -0.25f, 0.0f, 0.1f, 0.5f, 0.5f}).view({7, 1})));
  EXPECT_TRUE(at::equal(env, before)) << "the env's rewards changed in place";

  loss.reward_clip = 0.0;  // off: scaled only
  EXPECT_TRUE(at::allclose(training_rewards(env, loss), env * 0.5));
  loss.reward_clip = 2.5;
  loss.reward_scale = 1.0;  // clipped only
  EXPECT_TRUE(at::equal(training_rewards(env, loss),
                        at::tensor({-2.5f, -1.0f, -0.5f, 0.0f, 0.2f, 1.0f, 2.5f}).view({7, 1})));
  EXPECT_TRUE(at::equal(env, before));
}

}  // namespace
}  // namespace pronghorn::learner
