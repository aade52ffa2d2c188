#include "envs/env.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/testing/error_of.h"
#include "envs/testing/buffers.h"

namespace pronghorn::envs {
namespace {

using pronghorn::testing::error_of;

TEST(EnvTest, BuiltinsAreListedWithTheirSpaces) {
  std::vector<EnvSpec> specs = builtin_env_specs();
  ASSERT_EQ(specs.size(), 4u);
  EXPECT_EQ(specs[0].describe(), "obs float32[4], 2 discrete actions, time limit 500");
  EXPECT_EQ(specs[1].describe(), "obs uint8[1, 32, 32], 3 discrete actions, time limit 2000");
  EXPECT_EQ(specs[2].describe(),
            "obs float32[3], continuous actions float32[1] in [-2, 2], time limit 200");
  EXPECT_EQ(specs[3].describe(), "obs float32[3], 2 discrete actions, time limit 100");
  EXPECT_EQ(specs[1].obs_bytes(), 1024u);
  EXPECT_EQ(specs[2].action_bytes(), 4u);
}

TEST(EnvTest, UnknownNameSuggestsABuiltin) {
  std::string message = error_of([] { make_builtin_env("cartpol", 4, 1, 0); });
  EXPECT_NE(message.find("env.name = \"cartpol\""), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean cartpole?"), std::string::npos) << message;
}

TEST(EnvTest, ConfigPicksEnvAndTimeLimit) {
  EnvConfig config;
  config.name = "pendulum";
  config.num_envs = 3;
  config.max_episode_steps = 7;
  auto env = make_env(config, 1);
  EXPECT_EQ(env->spec().name, "pendulum");
  EXPECT_EQ(env->num_envs(), 3);
  EXPECT_EQ(env->spec().max_episode_steps, 7);
}

TEST(EnvTest, StepBeforeResetIsAnError) {
  auto env = make_builtin_env("cartpole", 2, 1, 0);
  Buffers buf(env->spec(), 2);
  int32_t actions[2] = {0, 1};
  EXPECT_NE(error_of([&] { env->step(actions, buf.out()); }).find("before reset"),
            std::string::npos);
}

TEST(EnvTest, OutOfRangeDiscreteActionNamesEnvRowAndValue) {
  auto env = make_builtin_env("pong", 3, 1, 0);
  Buffers buf(env->spec(), 3);
  env->reset(buf.obs.data());
  int32_t actions[3] = {0, 3, 1};
  EXPECT_EQ(error_of([&] { env->step(actions, buf.out()); }),
            "env pong: action 3 of env 1 is out of range: expected 0 to 2");
  actions[1] = -1;
  EXPECT_NE(error_of([&] { env->step(actions, buf.out()); }).find("action -1 of env 1"),
            std::string::npos);
  actions[1] = 2;
  EXPECT_EQ(error_of([&] { env->step(actions, buf.out()); }), "");
}

TEST(EnvTest, FinalObsIsOptional) {
  auto env = make_builtin_env("cartpole", 16, 1, 5);
  Buffers buf(env->spec(), 16);
  env->reset(buf.obs.data());
  std::vector<int32_t> actions(16, 1);
  for (int t = 0; t < 5; ++t) env->step(actions.data(), buf.out(/*with_final_obs=*/false));
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(buf.truncated[i]) << i;
}

}  // namespace
}  // namespace pronghorn::envs
