// Evaluation end to end, as real processes: a run evaluates its greedy
// policy on envs of its own, keeps the best as checkpoints/best.ckpt through
// the pruning of the last N, stops as solved only when an evaluation reaches
// run.target_return, and `pronghorn eval` reproduces the run's numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace pronghorn::testing;
namespace fs = std::filesystem;

std::string bin() { return PRONGHORN_BIN; }

// The raw text of "key": value in a flat JSON object (a string keeps its quotes), or "".
std::string json_value(const std::string& json, const std::string& key) {
  const std::regex pattern("\"" + key + R"(": ("(?:[^"\\]|\\.)*"|[^,}]+))");
  std::smatch m;
  return std::regex_search(json, m, pattern) ? m[1].str() : "";
}

std::string json_string(const std::string& json, const std::string& key) {
  const std::string raw = json_value(json, key);
  return raw.size() >= 2 && raw.front() == '"' ? raw.substr(1, raw.size() - 2) : "";
}

// A number; NaN for null or a missing key.
double json_number(const std::string& json, const std::string& key) {
  const std::string raw = json_value(json, key);
  return raw.empty() || raw == "null" ? std::nan("") : std::stod(raw);
}

struct EvalRun {
  std::string name = "eval-test-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string dir = ::testing::TempDir() + "/" + name;
  EvalRun() { fs::remove_all(dir); }
  ~EvalRun() { fs::remove_all(dir); }
};

// `pronghorn train` in the foreground on any free ports: exit code and output.
std::pair<int, std::string> train(const EvalRun& run, const std::string& sets) {
  return shell(bin() + " --log-level warn train --run-dir " + run.dir + " --set run.name=" +
               run.name + " --set server.address=127.0.0.1:0 --set server.metrics_port=0 " + sets);
}

std::vector<std::string> metrics_lines(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(EvalTest, RunKeepsItsBestPolicyAndEvalReproducesItsEvaluation) {
  EvalRun run;
  const auto [code, out] =
      train(run,
            "--set run.target_return=150 --set "
            "run.total_steps=30000000 --set run.eval_interval_s=0.5 --set run.eval_episodes=5 "
            "--set run.checkpoint_interval_s=0.3 --set run.keep_checkpoints=1 --set "
            "run.report_interval_s=0.2");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("on evaluation (5 greedy episodes"), std::string::npos) << out;

  // metrics.jsonl: no evaluation figures before the first (which may come
  // before the first line on a slow start), then the last one's.
  const std::vector<std::string> lines = metrics_lines(run.dir);
  ASSERT_FALSE(lines.empty());
  double best_seen = -1e300;
  for (const std::string& line : lines) {
    if (json_number(line, "eval_episodes") == 0) {
      EXPECT_EQ(json_value(line, "eval_return_mean"), "null") << line;
    } else {
      EXPECT_EQ(json_number(line, "eval_episodes"), 5) << line;
      best_seen = std::max(best_seen, json_number(line, "eval_return_mean"));
    }
  }
  EXPECT_GE(json_number(lines.back(), "eval_return_mean"), 150) << "solved on evaluation";
  EXPECT_EQ(json_number(lines.back(), "eval_episodes"), 5);

  // best.ckpt beside the last 1, holding the best evaluation's policy.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(run.dir + "/checkpoints")) {
    names.push_back(e.path().filename());
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 3u) << ::testing::PrintToString(names);
  EXPECT_EQ(names[0], "best.ckpt");
  EXPECT_EQ(names[1], "best.json");
  EXPECT_EQ(names[2].rfind("env-steps-", 0), 0u);
  const std::string record = slurp(run.dir + "/checkpoints/best.json");
  const double best = json_number(record, "eval_return_mean");
  EXPECT_GE(best, best_seen) << record;
  EXPECT_GE(best, 150) << record;

  // `pronghorn eval RUN_DIR`: its best.ckpt, the run's episodes and seed, greedy.
  const auto [eval_code, json] = shell(bin() + " eval " + run.dir + " --json");
  ASSERT_EQ(eval_code, 0) << json;
  EXPECT_EQ(json_string(json, "checkpoint"), run.dir + "/checkpoints/best.ckpt") << json;
  EXPECT_EQ(json_string(json, "policy"), "greedy");
  EXPECT_EQ(json_number(json, "episodes"), 5);
  EXPECT_NEAR(json_number(json, "return_mean"), best, 1e-9) << json << record;
  EXPECT_NEAR(json_number(json, "return_std"), json_number(record, "eval_std"), 1e-9);
  EXPECT_EQ(json_number(json, "checkpoint_env_steps"), json_number(record, "env_steps"));

  const auto [sample_code, sampled] = shell(bin() + " eval " + run.dir + " --json --sample");
  ASSERT_EQ(sample_code, 0) << sampled;
  EXPECT_EQ(json_string(sampled, "policy"), "sampled");

  const std::string newest = run.dir + "/checkpoints/" + names[2];
  const auto [text_code, text] = shell(bin() + " eval " + newest + " --episodes 3");
  ASSERT_EQ(text_code, 0) << text;
  EXPECT_NE(text.find("(greedy policy, env cartpole, 3 episodes): return mean "), std::string::npos)
      << text;
}

// An untrained policy (the learning rate at its floor: the weights do not
// move) that plays CartPole about as well as random play when sampled (22
// steps) and badly when greedy: run.seed 6's most likely action ends its
// evaluation episodes in about 9 steps (checked below on its checkpoint).
// The training mean crosses 15 at once, every evaluation stays below it, and
// the run must go on to its step budget instead of stopping as solved.
TEST(EvalTest, TrainingReturnAtTheTargetIsNotSolvedWithoutTheEvaluation) {
  EvalRun run;
  const auto [code, out] = train(run,
                                 "--set run.seed=6 --set run.target_return=15 --set "
                                 "learner.learning_rate=1e-12 --set run.total_steps=300000 --set "
                                 "run.eval_interval_s=0 --set run.eval_episodes=5 --set "
                                 "run.report_interval_s=0.2");
  ASSERT_EQ(code, 0) << out;
  const auto [eval_code, json] = shell(bin() + " eval " + run.dir + " --json");
  ASSERT_EQ(eval_code, 0) << json;
  ASSERT_LT(json_number(json, "return_mean"), 15) << "the premise: a poor greedy policy\n" << json;
  EXPECT_EQ(out.find("solved"), std::string::npos) << out;
  EXPECT_NE(out.find("stopped after"), std::string::npos) << out;
  const std::vector<std::string> lines = metrics_lines(run.dir);
  ASSERT_FALSE(lines.empty());
  EXPECT_GE(json_number(lines.back(), "episode_return_mean"), 15) << lines.back();
  EXPECT_EQ(json_number(lines.back(), "eval_episodes"), 5) << "the target asked for evaluations";
  EXPECT_LT(json_number(lines.back(), "eval_return_mean"), 15) << lines.back();
  EXPECT_GE(json_number(lines.back(), "env_steps"), 300000);
}

TEST(EvalTest, TargetDefaultsToTheEnvsOwnAPluginsTooWhereItDeclaresOne) {
  const auto target_of = [](const std::string& sets) {
    const auto [code, out] = shell(bin() + " train --print-config " + sets);
    std::smatch m;
    return code == 0 && std::regex_search(out, m, std::regex(R"(target_return = \S+)"))
               ? m[0].str()
               : "exit " + std::to_string(code) + ": " + out;
  };
  EXPECT_EQ(target_of(""), "target_return = 475.0");
  EXPECT_EQ(target_of("--set env.name=pendulum"), "target_return = -250.0");
  EXPECT_EQ(target_of("--set env.name=pong"), "target_return = 1.0");
  EXPECT_EQ(target_of("--set env.name=pendulum --set run.target_return=-100"),
            "target_return = -100.0");
  // envs/examples/corridor.c declares one (pronghorn_env_plugin_target).
  EXPECT_EQ(target_of(std::string("--set env.plugin=") + CORRIDOR_PLUGIN), "target_return = 0.95");
}

TEST(EvalTest, EvalOfADirectoryWithoutCheckpointsIsOneClearError) {
  EvalRun run;
  fs::create_directories(run.dir + "/checkpoints");
  const auto [code, out] = shell(bin() + " eval " + run.dir);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("no valid checkpoint in " + run.dir + "/checkpoints"), std::string::npos)
      << out;
}

// `eval --video` records a pixel env's episodes through ffmpeg: ffprobe
// decodes the file and counts one frame per env step, the steps
// --episodes-out lists episode by episode; an env without frames is one
// clear line, exit 2.
TEST(EvalTest, VideoOfPongHasAFramePerStepOfTheEpisodesItLists) {
  EvalRun run;
  const auto [trained, log] =
      train(run, "-c " + std::string(PRONGHORN_SOURCE_DIR) +
                     "/configs/pong.toml --set run.total_steps=50000 --set actor.count=1");
  ASSERT_EQ(trained, 0) << log;
  const std::string video = run.dir + "/play.mp4", episodes = run.dir + "/episodes.jsonl";
  const auto [code, out] = shell(bin() + " eval " + run.dir + " --episodes 2 --video " + video +
                                 " --episodes-out " + episodes);
  ASSERT_EQ(code, 0) << out;
  int64_t steps = 0;
  const std::vector<std::string> lines = lines_of(slurp(episodes));
  ASSERT_EQ(lines.size(), 2u) << slurp(episodes);
  for (const std::string& line : lines) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(
        line, m, std::regex(R"(\{"episode": \d, "return": -?[\d.e+-]+, "length": (\d+)\})")))
        << line;
    steps += std::stoll(m[1]);
  }
  const auto [probed, probe] = shell(
      "ffprobe -v error -count_frames -select_streams v:0 -show_entries "
      "stream=nb_read_frames,width,height,codec_name -of default=nw=1 " +
      video);
  ASSERT_EQ(probed, 0) << probe << " (tools/setup-deps installs ffmpeg)";
  EXPECT_NE(probe.find("codec_name=h264\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("width=256\nheight=256\n"), std::string::npos)
      << "32 × 32 frames scaled 8 times\n"
      << probe;
  EXPECT_NE(probe.find("nb_read_frames=" + std::to_string(steps) + "\n"), std::string::npos)
      << probe << "\nsteps: " << steps;
  EXPECT_NE(out.find("video of " + std::to_string(steps) + " env steps: " + video),
            std::string::npos)
      << out;

  // An ffmpeg that fails (here a stand-in on PATH that writes a stub file
  // and exits 1): one line with its message, exit 1, no file left.
  const std::string fake = run.dir + "/fake-bin";
  fs::create_directories(fake);
  {
    std::ofstream script(fake + "/ffmpeg");
    script << "#!/bin/sh\nfor a; do last=$a; done\n: > \"${last#file:}\"\n"
              "echo 'fake ffmpeg: no encoder here' >&2\nexit 1\n";
  }
  fs::permissions(fake + "/ffmpeg", fs::perms::owner_all);
  const std::string broken = run.dir + "/broken.mp4";
  const auto [failed, failure] =
      shell("PATH=" + fake + ":$PATH " + bin() + " eval " + run.dir + " --video " + broken);
  EXPECT_EQ(failed, 1) << failure;
  EXPECT_EQ(lines_of(failure).size(), 1u) << failure;
  EXPECT_NE(failure.find("fake ffmpeg: no encoder here"), std::string::npos) << failure;
  EXPECT_FALSE(fs::exists(broken)) << "a failed video is not left behind";

  EvalRun cartpole;
  ASSERT_EQ(train(cartpole, "--set run.total_steps=20000").first, 0);
  const auto [refused, why] = shell(bin() + " eval " + cartpole.dir + " --video " + video + "2");
  EXPECT_EQ(refused, 2) << why;
  EXPECT_EQ(lines_of(why).size(), 1u) << why;
  EXPECT_NE(why.find("env cartpole has obs float32[4]"), std::string::npos) << why;
}

}  // namespace
