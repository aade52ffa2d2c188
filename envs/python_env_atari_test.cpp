// Atari through the env host, by the protocol of Machado et al. (2018) as
// configs/atari.toml (ale-py) and configs/atari_envpool.toml (EnvPool) pass
// it: the same bytes in a ring slot as each library's own loop, and the
// protocol read back from the env each preset runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>

#include "core/config.h"
#include "envs/testing/gym_rollout.h"
#include "envs/testing/python_envs.h"

namespace pronghorn::envs {
namespace {

using testing::expect_same_as_gymnasium;
using testing::run_command;
using testing::test_python;

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

}  // namespace
}  // namespace pronghorn::envs
