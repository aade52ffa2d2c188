// Python-hosted envs against Gymnasium itself: a plain Python loop in the
// same interpreter (tests/testing/gym_reference.py) and the env worker give
// the same bytes in a ring slot (envs/testing/gym_rollout.h; Atari's in
// envs/python_env_atari_test.cpp); and what a user's env can get wrong.
#include "envs/python_env.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "envs/testing/buffers.h"
#include "envs/testing/gym_rollout.h"
#include "envs/testing/python_envs.h"

namespace pronghorn::envs {
namespace {

using testing::expect_same_as_gymnasium;
using testing::mapped_files;
using testing::python_env;
using testing::python_version;
using testing::run_command;
using testing::test_python;
using testing::use_test_envs;

TEST(PythonEnvTest, CartPoleIsGymnasiumsBitForBit) {
  const std::string python = test_python();
  expect_same_as_gymnasium(python, {"CartPole-v1", 4, 300, 25, 2, 1});
}

TEST(PythonEnvTest, PendulumIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"Pendulum-v1", 4, 120, 50, 0, 2});
}

TEST(PythonEnvTest, LunarLanderIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"LunarLander-v3", 4, 800, 100, 2, 1});
}

// MuJoCo locomotion (float64 observations, taken as float32): HalfCheetah
// never terminates; Hopper, Walker2d and Ant fall under random actions.
TEST(PythonEnvTest, HalfCheetahIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"HalfCheetah-v5", 4, 120, 50, 0, 2});
}

TEST(PythonEnvTest, HopperIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"Hopper-v5", 4, 300, 30, 2, 1});
}

TEST(PythonEnvTest, Walker2dIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"Walker2d-v5", 4, 300, 20, 2, 2});
}

TEST(PythonEnvTest, AntIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"Ant-v5", 4, 300, 40, 1, 1});
}

// EnvPool resets an ended env on its next step; the worker's SAME_STEP
// vector over it must neither lose nor make up a transition.
TEST(PythonEnvTest, EnvPoolsCartPoleIsEnvPoolsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"envpool:CartPole-v1", 4, 300, 25, 2, 1});
}

// An actor's envs split over several workers (8 over 3: 3, 3, 2), each
// env seeded as with one: the same bytes as the reference.
TEST(PythonEnvTest, SeveralWorkersStepTheSameEnvsAsOne) {
  expect_same_as_gymnasium(test_python(), {"CartPole-v1", 8, 200, 25, 1, 1, 3});
  expect_same_as_gymnasium(test_python(), {"envpool:CartPole-v1", 8, 200, 25, 1, 1, 2});
}

// env.splits: each worker holds its share of every split as a vector env of
// its own and steps one while the actor acts for another; the envs are
// seeded as with one split, so the bytes are the reference's. 12 envs in 2
// splits over 2 workers (worker 0 holds envs 0-2 and 6-8), in 3 splits
// over one; EnvPool's pools seeded by their first env the same way.
TEST(PythonEnvTest, SplitsStepTheSameEnvsAsOne) {
  const auto in_splits = [](testing::Rollout r, int64_t splits) {
    r.splits = splits;
    return r;
  };
  expect_same_as_gymnasium(test_python(), in_splits({"CartPole-v1", 12, 200, 25, 1, 1, 2}, 2));
  expect_same_as_gymnasium(test_python(), in_splits({"LunarLander-v3", 6, 800, 100, 2, 1}, 3));
  expect_same_as_gymnasium(test_python(),
                           in_splits({"envpool:CartPole-v1", 8, 200, 25, 1, 1, 2}, 2));
}

// Any CPython >= 3.10 the user names: one of another minor version than
// Debian's, with its own venv, where this machine has one.
TEST(PythonEnvTest, AnotherInterpretersCartPoleIsGymnasiumsBitForBit) {
  const std::string debian = python_version(test_python());
  const auto [other, version] = testing::other_python(
      [&](int minor) { return minor >= 10 && "3." + std::to_string(minor) != debian; });
  if (other.empty()) {
    PRONGHORN_SKIP_UNLESS_CI("no CPython >= 3.10 other than Debian's " + debian +
                             " on this machine (pythonX.Y on PATH or pyenv)");
  }
  const std::string python = test_python("--python " + other);
  ASSERT_EQ(python_version(python), version);
  expect_same_as_gymnasium(python, {"CartPole-v1", 4, 300, 25, 2, 1});
}

TEST(PythonEnvTest, TheSpecComesFromTheSpaces) {
  auto cartpole = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python()), 1);
  EXPECT_EQ(cartpole->spec().obs_shape, std::vector<int64_t>{4});
  EXPECT_EQ(cartpole->spec().obs_dtype, Dtype::kFloat32);
  EXPECT_EQ(cartpole->spec().action_kind, ActionKind::kDiscrete);
  EXPECT_EQ(cartpole->spec().action_size, 2);
  EXPECT_EQ(cartpole->spec().max_episode_steps, 500);
  EXPECT_EQ(cartpole->spec().target_return, 475);
  auto pendulum = PythonEnv::start(python_env("gymnasium:Pendulum-v1", test_python()), 1);
  EXPECT_EQ(pendulum->spec().action_kind, ActionKind::kContinuous);
  EXPECT_EQ(pendulum->spec().action_low, std::vector<float>{-2});
  EXPECT_EQ(pendulum->spec().action_high, std::vector<float>{2});
}

// The worker is the user's interpreter with the env's packages, nothing of ours.
TEST(PythonEnvTest, TheWorkerLoadsNoLibTorchAndNoPronghornCode) {
  auto env = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python()), 1);
  bool python = false, numpy = false;
  for (const std::string& file : mapped_files(env->worker_pids().front())) {
    const std::string name = file.substr(file.rfind('/') + 1);
    python |= name.starts_with("python3");
    numpy |= file.find("/numpy") != std::string::npos;
    EXPECT_FALSE(name.starts_with("libtorch") || name.starts_with("libc10")) << file;
    EXPECT_FALSE(name.starts_with("pronghorn") || name.starts_with("libpronghorn")) << file;
  }
  EXPECT_TRUE(python && numpy) << "not the worker's maps?";
}

TEST(PythonEnvTest, AUsersEnvThatImportsPyTorchWorks) {
  use_test_envs();
  auto env = PythonEnv::start(
      python_env("python:pronghorn_test_envs:make_torch_walk", test_python("--torch")), 3);
  Buffers b(env->spec(), 4);
  env->reset(b.obs.data());
  const std::vector<int32_t> right(4, 1);
  env->step(right.data(), b.out());
  EXPECT_EQ(b.obs_as<float>()[1], 1.0f) << "the step count, computed by PyTorch";
  bool torch = false;
  for (const std::string& file : mapped_files(env->worker_pids().front())) {
    torch |= file.find("libtorch") != std::string::npos;
  }
  EXPECT_TRUE(torch) << "the user's PyTorch, loaded in the worker";
}

TEST(PythonEnvTest, OptionsAreTheEnvsKeywordArguments) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), 2);
  config.options["length"] = "2";
  auto env = PythonEnv::start(config, 5);
  Buffers b(env->spec(), 2);
  env->reset(b.obs.data());
  const std::vector<int32_t> right(2, 1);
  for (int t = 0; t < 3 && b.terminated[0] == 0; ++t) env->step(right.data(), b.out());
  EXPECT_EQ(b.terminated[0], 1) << "length 2: the right end within 3 steps";
  EXPECT_EQ(b.final_obs_as<float>()[0], 2.0f);
}

// env.episode_info: an ended row gets the numbers of its last step's info,
// NaN where that info had none; rows still running are left alone. Two
// workers, so the rows of the second land after the first's.
TEST(PythonEnvTest, EpisodeInfoHoldsTheNumbersOfEachEndedEpisode) {
  use_test_envs();
  constexpr int64_t K = 4;
  EnvConfig config = python_env("python:pronghorn_test_envs:make_scored_walk", test_python(), K);
  config.options["length"] = "2";
  config.workers = 2;
  config.episode_info = {"score", "stats/steps", "won", "absent"};
  auto env = PythonEnv::start(config, 3);
  ASSERT_EQ(env->spec().episode_info, config.episode_info);
  Buffers b(env->spec(), K);
  std::vector<float> info(K * 4, -1.0f);
  StepOutput out = b.out();
  out.episode_info = info.data();
  env->reset(b.obs.data());
  int won = 0, lost = 0;
  uint32_t lcg = 7;
  for (int t = 0; t < 200; ++t) {
    std::vector<int32_t> actions(K);
    for (int32_t& a : actions) a = static_cast<int32_t>((lcg = lcg * 1664525u + 1013904223u) >> 31);
    std::fill(info.begin(), info.end(), -1.0f);
    env->step(actions.data(), out);
    for (int64_t i = 0; i < K; ++i) {
      const float* row = info.data() + i * 4;
      if (!b.terminated[i]) {
        EXPECT_EQ(row[0], -1.0f) << "a running row is not written";
        continue;
      }
      const float position = b.final_obs_as<float>()[i * 2],
                  steps = b.final_obs_as<float>()[i * 2 + 1];
      const bool right = position >= 2;
      (right ? won : lost) += 1;
      if (right) {
        EXPECT_EQ(row[0], 10 * steps) << "env " << i << " at step " << t;
      } else {
        EXPECT_TRUE(std::isnan(row[0])) << "no score in a lost episode's info: " << row[0];
      }
      EXPECT_EQ(row[1], steps);
      EXPECT_EQ(row[2], right ? 1.0f : 0.0f);
      EXPECT_TRUE(std::isnan(row[3]));
    }
  }
  EXPECT_GE(won, 5);
  EXPECT_GE(lost, 5);
}

// EnvPool's info of the ending step: elapsed_step is the episode's length.
TEST(PythonEnvTest, EpisodeInfoOfAnEnvPoolEnvIsItsStepInfo) {
  constexpr int64_t K = 4;
  EnvConfig config = python_env("envpool:CartPole-v1", test_python(), K);
  config.episode_info = {"elapsed_step"};
  auto env = PythonEnv::start(config, 2);
  Buffers b(env->spec(), K);
  std::vector<float> info(K);
  StepOutput out = b.out();
  out.episode_info = info.data();
  env->reset(b.obs.data());
  std::vector<int> length(K, 0);
  int ended = 0;
  const std::vector<int32_t> right(K, 1);
  for (int t = 0; t < 100; ++t) {
    env->step(right.data(), out);
    for (int64_t i = 0; i < K; ++i) {
      ++length[i];
      if (!b.terminated[i] && !b.truncated[i]) continue;
      EXPECT_EQ(info[i], static_cast<float>(length[i])) << "env " << i << " at step " << t;
      length[i] = 0;
      ++ended;
    }
  }
  EXPECT_GE(ended, 8);
}

// The start check names the packages the env loaded, at their versions.
TEST(PythonEnvTest, TheStartCheckNamesTheEnvsPackages) {
  const std::string python = test_python();
  const EnvSpec spec =
      probe_python_env(python_env("gymnasium:CartPole-v1", python), std::chrono::seconds(60));
  const std::string versions = testing::last_line(
      run_command(python + " -c 'import gymnasium, numpy; print(gymnasium.__version__, "
                           "numpy.__version__)'")
          .out);
  EXPECT_EQ(spec.packages.at("python"), python_version(python));
  EXPECT_EQ(spec.packages.at("gymnasium") + " " + spec.packages.at("numpy"), versions);
  EXPECT_EQ(spec.packages.count("Box2D"), 0u) << "installed beside it (LunarLander's), unused";
}

TEST(PythonEnvTest, TheSameSeedGivesTheSameEpisodesAndAnotherSeedOthers) {
  auto first_obs = [](uint64_t seed) {
    auto env = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python(), 8), seed);
    std::vector<float> obs(4 * 8);
    env->reset(obs.data());
    return obs;
  };
  const std::vector<float> a = first_obs(11);
  EXPECT_EQ(first_obs(11), a);
  EXPECT_NE(first_obs(12), a);
  for (int i = 1; i < 8; ++i) {
    EXPECT_NE(std::vector<float>(a.begin() + 4 * i, a.begin() + 4 * i + 4),
              std::vector<float>(a.begin(), a.begin() + 4))
        << "env " << i << " starts where env 0 does";
  }
}

}  // namespace
}  // namespace pronghorn::envs
