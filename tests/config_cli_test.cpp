// `pronghorn config` refuses what `pronghorn train` refuses, with the same
// line and exit 2, and neither crashes on config text built to break the
// TOML parser (a key of 40,000 dotted parts overflowed its stack).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/job.h"

namespace {

namespace fs = std::filesystem;
using namespace pronghorn::testing;

const std::string kBin = PRONGHORN_BIN;

// Exit code and output of `pronghorn <args>`, killed after 60 s.
std::pair<int, std::string> pronghorn_cli(const std::string& args) {
  return shell("timeout -k 5 60 " + kBin + " " + args);
}

// A fresh folder of this test, `what` in it.
std::string test_dir(const std::string& what) {
  std::string dir = ::testing::TempDir() + "/config-cli-" + std::to_string(getpid()) + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" + what;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Both commands exit 2 with `line` for the same `config_args`; train
// leaves no run directory behind.
void expect_both_refuse(const std::string& config_args, const std::string& line) {
  const std::string run_dir = test_dir("run") + "/run";
  auto [config_code, config_out] = pronghorn_cli("config " + config_args);
  EXPECT_EQ(config_code, 2) << config_out;
  EXPECT_NE(config_out.find(line), std::string::npos) << config_out;
  auto [train_code, train_out] = pronghorn_cli("train --run-dir " + run_dir +
                                               " --set server.address=127.0.0.1:0 " + config_args);
  EXPECT_EQ(train_code, 2) << train_out;
  EXPECT_NE(train_out.find(line), std::string::npos) << train_out;
  EXPECT_FALSE(fs::exists(run_dir));
}

TEST(ConfigCliTest, AnUnknownEnvIsRefusedByConfigAsByTrain) {
  expect_both_refuse("--set env.name=cartpol",
                     "env.name = \"cartpol\": no such built-in env (did you mean cartpole?)");
}

TEST(ConfigCliTest, AModelThatDoesNotFitTheEnvIsRefusedByConfigAsByTrain) {
  expect_both_refuse(
      "--set model.kind=impala_cnn",
      "model.kind = \"impala_cnn\": env cartpole has no [C, H, W] image observations");
}

// As expect_both_refuse, with the run directory made by train itself under
// run.dir: the refusal leaves no run.dir behind either (no empty runs/).
void expect_both_refuse_leaving_no_run_dir(const std::string& config_args,
                                           const std::string& line) {
  const std::string runs = test_dir("run") + "/runs";
  auto [config_code, config_out] = pronghorn_cli("config " + config_args);
  EXPECT_EQ(config_code, 2) << config_out;
  EXPECT_NE(config_out.find(line), std::string::npos) << config_out;
  auto [train_code, train_out] = pronghorn_cli("train --set run.dir=" + runs +
                                               " --set server.address=127.0.0.1:0 " + config_args);
  EXPECT_EQ(train_code, 2) << train_out;
  EXPECT_NE(train_out.find(line), std::string::npos) << train_out;
  EXPECT_FALSE(fs::exists(runs)) << "train left " << runs << " behind";
}

TEST(ConfigCliTest, MoreActorsThanThisNodeHoldsAreRefusedByConfigAsByTrain) {
  // 2 per core: 1000 is over the cap on any machine under 500 cores.
  expect_both_refuse_leaving_no_run_dir("--set run.name=many --set actor.count=1000",
                                        "actor.count = 1000: this node holds at most ");
  auto [code, out] = pronghorn_cli("config --set actor.count=1000 --set actor.oversubscribe=true");
  EXPECT_EQ(code, 0) << out;
}

TEST(ConfigCliTest, ARunNameTooLongForADirectoryIsRefusedByConfigAsByTrain) {
  expect_both_refuse_leaving_no_run_dir("--set run.name=" + std::string(256, 'n'),
                                        "run.name: 256 characters, expected at most 255");
  auto [code, out] = pronghorn_cli("config --set run.name=" + std::string(255, 'n'));
  EXPECT_EQ(code, 0) << out;
}

TEST(ConfigCliTest, AKeyOfFortyThousandDottedPartsIsExitTwoNotACrash) {
  const std::string path = test_dir("files") + "/deep.toml";
  std::string key = "a";
  for (int i = 1; i < 40000; ++i) key += ".a";
  std::ofstream(path) << "[env]\n" << key << " = 1\n";
  expect_both_refuse("-c " + path,
                     "config: " + path + ": line 2: a key of 40000 dotted parts; at most 8");
  expect_both_refuse("--set 'model.hidden={ " + key.substr(0, 2001) + " = 1 }'",
                     "a key of 1001 dotted parts; at most 8");
}

TEST(ConfigCliTest, AConfigThatNeverEndsIsExitTwo) {
  expect_both_refuse("-c /dev/zero",
                     "config: /dev/zero: more than 1048576 bytes; a config file is at most that");
}

TEST(ConfigCliTest, ResumingARunWhoseConfigIsAFifoIsExitTwoNotAHang) {
  const std::string run = test_dir("run");
  ASSERT_EQ(mkfifo((run + "/config.toml").c_str(), 0600), 0);
  auto [code, out] = pronghorn_cli("train --resume " + run);
  EXPECT_EQ(code, 2) << out;  // 124: it blocked opening the FIFO
  EXPECT_NE(out.find(run + "/config.toml: not a regular file"), std::string::npos) << out;
}

}  // namespace
