// Python-hosted envs against Gymnasium itself: a plain Python loop in the
// same interpreter (tests/testing/gym_reference.py) and the env worker give
// the same bytes in a ring slot; and what a user's env can get wrong.
#include "envs/python_env.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "buffer/ring.h"
#include "buffer/slot_view.h"
#include "buffer/testing/names.h"
#include "core/config.h"
#include "envs/testing/buffers.h"
#include "envs/testing/python_envs.h"

namespace pronghorn::envs {
namespace {

using testing::expect_contains;
using testing::mapped_files;
using testing::python_env;
using testing::python_version;
using testing::read_file;
using testing::run_command;
using testing::test_python;
using testing::use_test_envs;

struct Rollout {
  std::string env_id;
  int64_t k;
  int64_t steps;
  int64_t max_episode_steps;
  int min_terminations;  // each env's, at least (Pendulum never terminates)
  int min_truncations;
  int64_t workers = 1;  // env.workers
  // env.options beside max_episode_steps: name → a TOML value that is also JSON.
  std::map<std::string, std::string> options = {};
  uint64_t seed = 7;  // the actor's env seed
};

// Steps `rollout` through PythonEnv into one ring slot of `steps` steps, with
// the actions the reference drew, and compares every byte with the reference.
void expect_same_as_gymnasium(const std::string& python, const Rollout& r) {
  const uint64_t seed = r.seed;
  // Per test: two tests may roll out one env id at once (ctest -j).
  const std::string dir = ::testing::TempDir() + "gym-reference-" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
                          python_version(python);
  std::string options;
  if (r.max_episode_steps > 0)
    options = "\"max_episode_steps\": " + std::to_string(r.max_episode_steps);
  for (const auto& [name, value] : r.options) {
    options += (options.empty() ? "\"" : ", \"") + name + "\": " + value;
  }
  options = "'{" + options + "}'";
  const auto reference =
      run_command(python + " " PRONGHORN_SOURCE_DIR "/tests/testing/gym_reference.py " + r.env_id +
                  " " + std::to_string(r.k) + " " + std::to_string(seed) + " " +
                  std::to_string(r.steps) + " " + options + " " + dir);
  ASSERT_EQ(reference.status, 0) << reference.out;
  int terminations = -1, truncations = -1;
  ASSERT_EQ(std::sscanf(reference.out.c_str(), "terminations %d truncations %d", &terminations,
                        &truncations),
            2);
  EXPECT_GE(terminations, r.min_terminations) << "the actions must end episodes both ways";
  EXPECT_GE(truncations, r.min_truncations);

  const bool envpool = r.env_id.starts_with("envpool:");
  EnvConfig config = python_env(envpool ? r.env_id : "gymnasium:" + r.env_id, python, r.k);
  config.max_episode_steps = r.max_episode_steps;
  config.workers = r.workers;
  for (const auto& [name, value] : r.options) config.options[name] = value;
  auto env = PythonEnv::start(config, seed);
  std::string tag = r.env_id;  // a segment's name has no '/'
  std::replace(tag.begin(), tag.end(), '/', '-');
  ASSERT_EQ(env->worker_pids().size(), static_cast<size_t>(r.workers));
  const EnvSpec& spec = env->spec();
  const auto unroll = buffer::unroll_spec_for(spec, r.steps, r.k);
  auto ring = buffer::Ring::create(buffer::testing::unique_name("gym-" + tag), unroll, 1);
  const auto slot = ring->claim(std::chrono::milliseconds(0));
  ASSERT_TRUE(slot);
  const buffer::SlotView out(ring->slot_data(*slot), ring->layout());

  const std::vector<uint8_t> actions = read_file(dir + "/actions.bin");
  const size_t row = spec.obs_bytes() * r.k, action_row = spec.action_bytes() * r.k;
  ASSERT_EQ(actions.size(), action_row * r.steps);
  std::vector<uint8_t> final_obs(row * r.steps, 0);
  env->reset(out.obs);
  for (int64_t t = 0; t < r.steps; ++t) {
    env->step(actions.data() + t * action_row,
              {out.obs + (t + 1) * row, out.rewards + t * r.k, out.terminated + t * r.k,
               out.truncated + t * r.k, final_obs.data() + t * row});
  }
  auto expect_bytes = [&](const char* name, const void* ours, size_t bytes) {
    const std::vector<uint8_t> theirs = read_file(dir + "/" + name + ".bin");
    ASSERT_EQ(theirs.size(), bytes) << name;
    EXPECT_EQ(std::memcmp(ours, theirs.data(), bytes), 0) << name << " differ from Gymnasium's";
  };
  expect_bytes("obs", out.obs, row * (r.steps + 1));
  expect_bytes("rewards", out.rewards, sizeof(float) * r.k * r.steps);
  expect_bytes("terminated", out.terminated, r.k * r.steps);
  expect_bytes("truncated", out.truncated, r.k * r.steps);
  expect_bytes("final_obs", final_obs.data(), final_obs.size());
  ring->abandon(*slot);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);  // Atari's: 100 MB
}

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

// A preset's env section, as a job reads it.
EnvConfig preset_env(const std::string& preset) {
  return load_config(PRONGHORN_SOURCE_DIR "/configs/" + preset + ".toml", {}).env;
}

// Atari by Machado et al. (2018)'s protocol, as configs/atari.toml passes it
// (sticky actions, frame skip 4, no life-loss ends, up to 30 no-ops; 84×84
// grayscale frames stacked 4): ale-py's own vector env, each env seeded as
// one of its own (seeds past 2^31 made C ints). Random play ends a Pong game
// after 780–900 steps: the long rollouts see one terminate, the short ones a
// lowered cap truncate.
std::map<std::string, std::string> ale_protocol(int64_t max_frames) {
  auto options = preset_env("atari").options;
  options["max_num_frames_per_episode"] = std::to_string(max_frames);
  return options;
}

TEST(PythonEnvTest, AlePongEndsItsGamesAsAlePyDoes) {
  expect_same_as_gymnasium(test_python(),
                           {"ALE/Pong-v5", 2, 1000, 0, 1, 0, 1, ale_protocol(108000), 5000});
}

TEST(PythonEnvTest, AlePongIsCutAtItsFrameCapAsAlePyCutsIt) {
  expect_same_as_gymnasium(test_python(),
                           {"ALE/Pong-v5", 2, 300, 0, 0, 2, 1, ale_protocol(480), 5000});
}

// EnvPool's Atari, as configs/atari_envpool.toml passes it: its options,
// its own preprocessing; max_episode_steps counts agent steps (27 000 =
// 108 000 frames).
std::map<std::string, std::string> envpool_protocol() {
  return preset_env("atari_envpool").options;
}

TEST(PythonEnvTest, EnvPoolPongEndsItsGamesAsEnvPoolDoes) {
  expect_same_as_gymnasium(test_python(),
                           {"envpool:Pong-v5", 2, 1000, 27000, 1, 0, 1, envpool_protocol()});
}

TEST(PythonEnvTest, EnvPoolPongIsCutAtItsStepCapAsEnvPoolCutsIt) {
  expect_same_as_gymnasium(test_python(),
                           {"envpool:Pong-v5", 2, 300, 120, 0, 2, 1, envpool_protocol()});
}

// What tests/testing/atari_protocol.py reads back from the vector env the
// worker makes of a preset's env section: name → value, one line each.
std::map<std::string, std::string> read_protocol(const std::string& python, const EnvConfig& env) {
  std::string options;
  for (const auto& [name, value] : env.options) {
    options += (options.empty() ? "\"" : ", \"") + name + "\": " + value;
  }
  const auto read =
      run_command(python + " " PRONGHORN_SOURCE_DIR "/tests/testing/atari_protocol.py " + env.name +
                  " '{" + options + "}' " + std::to_string(env.max_episode_steps));
  EXPECT_EQ(read.status, 0) << read.out;
  std::map<std::string, std::string> values;
  std::istringstream lines(read.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.find(' ');
    if (space != std::string::npos) values[line.substr(0, space)] = line.substr(space + 1);
  }
  return values;
}

// The protocol read back from the running env, not from the preset's text:
// ale-py's vector env has no getters, so it is read from what it shows (its
// spaces, its frame counters, and its play against the same env made with
// ale-py's default of no sticky actions); its frame cap shows only when
// reached, in the ring test above with a lowered cap.
TEST(PythonEnvTest, AlePyRunsTheAtariPresetsProtocol) {
  auto got = read_protocol(test_python(), preset_env("atari"));
  EXPECT_EQ(got["observation"], "uint8 [4, 84, 84]");  // grayscale 84×84, a stack of 4
  EXPECT_EQ(got["actions"], "6");                      // Pong's minimal action set
  EXPECT_EQ(got["frameskip"], "4");
  const int noops = std::atoi(got["noop_frames_max"].c_str());
  EXPECT_GT(noops, 0) << "no-op starts";
  EXPECT_LE(noops, 30);
  EXPECT_EQ(got["sticky_actions"], "1") << "plays as with repeat_action_probability = 0";
}

// EnvPool's running pool says its whole config.
TEST(PythonEnvTest, EnvPoolRunsTheAtariPresetsProtocol) {
  auto got = read_protocol(test_python(), preset_env("atari_envpool"));
  EXPECT_EQ(got["repeat_action_probability"], "0.25");
  EXPECT_EQ(got["frame_skip"], "4");
  EXPECT_EQ(got["max_episode_steps"], "27000");  // agent steps: 108 000 frames
  EXPECT_EQ(got["noop_max"], "30");
  EXPECT_EQ(got["episodic_life"], "false");
  EXPECT_EQ(got["use_fire_reset"], "false");
  EXPECT_EQ(got["reward_clip"], "false");
  EXPECT_EQ(got["full_action_space"], "false");
  EXPECT_EQ(got["actions"], "6");
  EXPECT_EQ(got["gray_scale"], "true");
  EXPECT_EQ(got["img_height"], "84");
  EXPECT_EQ(got["img_width"], "84");
  EXPECT_EQ(got["stack_num"], "4");
}

// An actor's envs split over several workers (8 over 3: 3, 3, 2), each
// env seeded as with one: the same bytes as the reference.
TEST(PythonEnvTest, SeveralWorkersStepTheSameEnvsAsOne) {
  expect_same_as_gymnasium(test_python(), {"CartPole-v1", 8, 200, 25, 1, 1, 3});
  expect_same_as_gymnasium(test_python(), {"envpool:CartPole-v1", 8, 200, 25, 1, 1, 2});
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
