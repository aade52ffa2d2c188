// `pronghorn export` end to end, as real processes: a short run of each kind
// of network (the MLP on the fused path and off it, the IMPALA and Nature CNNs on pixels,
// the LSTM over 3 steps with an episode start, the Gaussian head, normalised
// observations), exported;
// the NumPy loader and onnxruntime (tests/testing/check_export.py, in the
// pinned test venv) reproduce the binary's own forward pass (`pronghorn eval
// --dump-forward`, through the actors' policy face) within float32's
// tolerance; a policy exported from a solved CartPole run plays Gymnasium's
// CartPole-v1 to 475. Under CI a missing package fails (test_python), never
// skips.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "envs/testing/python_envs.h"
#include "export/safetensors.h"
#include "tests/testing/job.h"

namespace {

using namespace pronghorn::testing;
namespace fs = std::filesystem;

std::string bin() { return PRONGHORN_BIN; }
std::string checker() {
  return std::string(PRONGHORN_SOURCE_DIR) + "/tests/testing/check_export.py";
}

struct ExportRun {
  std::string name = "export-test-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string dir = ::testing::TempDir() + "/" + name;
  std::string run = dir + "/run";
  std::string out = dir + "/exported";
  std::string python = pronghorn::envs::testing::test_python();
  ExportRun() { fs::remove_all(dir); }
  ~ExportRun() {
    if (!::testing::Test::HasFailure()) fs::remove_all(dir);
  }

  // `pronghorn train` of `config` with `sets`, in the foreground, then
  // `pronghorn export`.
  void train_and_export(const std::string& config, const std::string& sets) {
    const auto [trained, log] = shell(
        bin() + " --log-level warn train -c " + std::string(PRONGHORN_SOURCE_DIR) + "/configs/" +
        config + " --run-dir " + run + " --set run.name=" + name +
        " --set run.seed=3 --set server.address=127.0.0.1:0 --set server.metrics_port=0 " + sets);
    ASSERT_EQ(trained, 0) << log;
    const auto [exported, out_text] = shell(bin() + " export " + run + " --out " + out);
    ASSERT_EQ(exported, 0) << out_text;
    for (const char* file :
         {"model.safetensors", "policy.json", "policy.onnx", "pronghorn_policy.py"})
      EXPECT_TRUE(fs::is_regular_file(out + "/" + file)) << file << "\n" << out_text;
  }

  // Observations of T steps of K envs; the binary's outputs for them with
  // `fast_path`; the loader's and onnxruntime's against those. The dump's
  // "fused" flag.
  std::string check_forward(int steps, int envs, const std::string& fast_path = "") {
    const std::string obs = dir + "/obs.safetensors", dump = dir + "/dump.safetensors";
    const auto [made, made_text] =
        shell(python + " " + checker() + " observations " + out + " " + obs + " " +
              std::to_string(steps) + " " + std::to_string(envs));
    EXPECT_EQ(made, 0) << made_text;
    const auto [dumped, dump_text] =
        shell(bin() + " eval " + run + " --dump-forward " + obs + " " + dump +
              (fast_path.empty() ? "" : " --fast-path " + fast_path));
    EXPECT_EQ(dumped, 0) << dump_text;
    const auto [compared, result] =
        shell(python + " " + checker() + " compare " + out + " " + obs + " " + dump);
    EXPECT_EQ(compared, 0) << result;
    std::cout << "[ compared ] " << result;  // the largest differences, for the log
    if (!fs::exists(dump)) return "";
    return pronghorn::exporting::read_safetensors(dump).metadata["fused"];
  }
};

TEST(ExportTest, SolvedCartPoleOnEitherPathMatchesTheBinaryAndPlaysGymnasiumsCartPole) {
  ExportRun r;
  ASSERT_NO_FATAL_FAILURE(r.train_and_export("cartpole.toml", "--set run.total_steps=5000000"));
  EXPECT_EQ(r.check_forward(2, 7), "1");         // the run's model.fast_path = auto: fused
  EXPECT_EQ(r.check_forward(2, 7, "off"), "0");  // LibTorch's PolicyNet
  const auto [played, result] =
      shell(r.python + " " + checker() + " play " + r.out + " CartPole-v1 20");
  ASSERT_EQ(played, 0) << result;
  std::cout << "[ played   ] " << result;
  const size_t at = result.find("mean_return=");
  ASSERT_NE(at, std::string::npos) << result;
  EXPECT_GE(std::stod(result.substr(at + 12)), 475.0) << result;
}

TEST(ExportTest, LstmOverThreeStepsWithAnEpisodeStartMatchesTheBinary) {
  ExportRun r;
  ASSERT_NO_FATAL_FAILURE(r.train_and_export(
      "cartpole.toml",
      "--set model.core=lstm --set model.hidden=[32] --set run.total_steps=20000"));
  EXPECT_EQ(r.check_forward(3, 6), "0");  // the LSTM never takes the fused path
}

TEST(ExportTest, ImpalaCnnOnPixelsMatchesTheBinary) {
  ExportRun r;
  ASSERT_NO_FATAL_FAILURE(r.train_and_export(
      "pong.toml", "--set model.kind=impala_cnn --set env.num_envs=8 --set run.total_steps=3000"));
  EXPECT_EQ(r.check_forward(2, 3), "0");
}

// Convolutions at strides 4 and 2 on frames that are not square, from a
// Python env (the built-in Pong's 32×32 frames are too small for it).
TEST(ExportTest, NatureCnnOnPixelsMatchesTheBinary) {
  ExportRun r;
  pronghorn::envs::testing::use_test_envs();
  ASSERT_NO_FATAL_FAILURE(r.train_and_export(
      "cartpole.toml",
      "--set env.name=python:pronghorn_test_envs:make_pixel_walk --set env.python=" + r.python +
          " --set model.kind=nature_cnn --set model.hidden=[32] --set model.activation=relu"
          " --set env.num_envs=8 --set run.total_steps=3000 --set run.target_return=0"));
  EXPECT_EQ(r.check_forward(2, 3), "0");
}

TEST(ExportTest, GaussianPolicyMatchesTheBinary) {
  ExportRun r;
  ASSERT_NO_FATAL_FAILURE(r.train_and_export("pendulum.toml", "--set run.total_steps=30000"));
  EXPECT_EQ(r.check_forward(2, 5), "1");
}

// model.normalize_observations: the statistics the run learned travel in
// the export (format 2) and both the loader and ONNX apply them, clip
// included, as the binary does on either path.
TEST(ExportTest, NormalisedObservationsOnEitherPathMatchTheBinary) {
  ExportRun r;
  ASSERT_NO_FATAL_FAILURE(
      r.train_and_export("pendulum.toml",
                         "--set run.total_steps=30000 --set model.normalize_observations=true "
                         "--set model.observation_clip=1.5"));
  const std::string json = shell("cat " + r.out + "/policy.json").second;
  EXPECT_NE(json.find("\"normalize\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"format_version\" : 2"), std::string::npos) << json;
  EXPECT_EQ(r.check_forward(2, 5), "1");
  EXPECT_EQ(r.check_forward(2, 5, "off"), "0");
}

// model.separate_value: the value head on its own MLP, with observation
// normalisation, as the MuJoCo presets run it, on both paths; the value MLP
// of other widths than the policy's (model.value_hidden), so that a value
// head read at the policy's width fails.
TEST(ExportTest, ASeparateValueNetworkMatchesTheBinary) {
  ExportRun r;
  ASSERT_NO_FATAL_FAILURE(r.train_and_export(
      "pendulum.toml",
      "--set run.total_steps=20000 --set model.separate_value=true "
      "--set model.normalize_observations=true --set 'model.value_hidden=[32,48,16]'"));
  const std::string json = shell("cat " + r.out + "/policy.json").second;
  EXPECT_NE(json.find("\"value_torso\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"value_width\" : 16"), std::string::npos) << json;
  EXPECT_EQ(r.check_forward(2, 5), "1");
  EXPECT_EQ(r.check_forward(2, 5, "off"), "0");
}

TEST(ExportTest, WhatAUserNamesWrongIsOneClearLine) {
  ExportRun r;
  const auto [missing, missing_text] =
      shell(bin() + " export " + r.dir + "/nothing --out " + r.out);
  EXPECT_EQ(missing, 2) << missing_text;
  EXPECT_NE(missing_text.find("no such run directory or checkpoint file"), std::string::npos)
      << missing_text;
  const auto [no_out, no_out_text] = shell(bin() + " export " + r.dir);
  EXPECT_EQ(no_out, 2) << no_out_text;

  ASSERT_NO_FATAL_FAILURE(r.train_and_export("cartpole.toml", "--set run.total_steps=3000"));
  const std::string pixels = r.dir + "/pixels.safetensors";
  pronghorn::exporting::Safetensors wrong;
  wrong.tensors.push_back({"obs", pronghorn::Dtype::kUInt8, {1, 1, 4}, std::string(4, '\0')});
  pronghorn::exporting::write_safetensors(pixels, wrong);
  const auto [bad, bad_text] =
      shell(bin() + " eval " + r.run + " --dump-forward " + pixels + " " + r.dir + "/o");
  EXPECT_EQ(bad, 2) << bad_text;
  EXPECT_NE(bad_text.find("\"obs\" is U8 [1, 1, 4]; env cartpole wants [T, K, 4] of F32"),
            std::string::npos)
      << bad_text;
  const std::string garbage = r.dir + "/garbage";
  shell("echo not a tensor file >" + garbage);
  const auto [unreadable, unreadable_text] =
      shell(bin() + " eval " + r.run + " --dump-forward " + garbage + " " + r.dir + "/o");
  EXPECT_EQ(unreadable, 1) << unreadable_text;
  EXPECT_NE(unreadable_text.find("not a safetensors file Pronghorn reads"), std::string::npos)
      << unreadable_text;
  EXPECT_EQ(lines_of(unreadable_text).size(), 1u) << unreadable_text;
}

}  // namespace
