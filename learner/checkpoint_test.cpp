#include "learner/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;

std::string fresh_folder(const char* what) {
  std::string dir = ::testing::TempDir() + "/ckpt-" + std::to_string(getpid()) + "-" + what;
  fs::remove_all(dir);
  return dir;
}

Checkpoint sample(uint64_t step) {
  Checkpoint c;
  c.env_steps = step * 1000;
  c.learner_steps = step;
  c.episodes = step * 3;
  c.policy_version = step + 1;
  c.parameters = {1.5f, -2.0f, static_cast<float>(step)};
  c.optimizer = std::string("opt\0state", 9);
  c.rng = "rng";
  return c;
}

TEST(CheckpointTest, RoundTripsEveryField) {
  const std::string dir = fresh_folder("roundtrip");
  std::string path = save_checkpoint(dir, sample(7), 3);
  EXPECT_EQ(path, dir + "/step-7.ckpt");
  std::string loaded_path;
  auto c = load_newest_checkpoint(dir, &loaded_path);
  ASSERT_TRUE(c);
  EXPECT_EQ(loaded_path, path);
  EXPECT_EQ(c->env_steps, 7000u);
  EXPECT_EQ(c->learner_steps, 7u);
  EXPECT_EQ(c->episodes, 21u);
  EXPECT_EQ(c->policy_version, 8u);
  EXPECT_EQ(c->parameters, sample(7).parameters);
  EXPECT_EQ(c->optimizer, sample(7).optimizer);
  EXPECT_EQ(c->rng, "rng");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(CheckpointTest, KeepsTheNewestOnes) {
  const std::string dir = fresh_folder("keep");
  for (uint64_t step : {1, 2, 3, 10, 11}) save_checkpoint(dir, sample(step), 3);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-10.ckpt", "step-11.ckpt", "step-3.ckpt"}));
}

TEST(CheckpointTest, CorruptAndTruncatedFilesAreSkippedForTheNewestValidOne) {
  const std::string dir = fresh_folder("corrupt");
  save_checkpoint(dir, sample(1), 5);
  save_checkpoint(dir, sample(2), 5);
  save_checkpoint(dir, sample(3), 5);
  {  // flip one byte in the middle of step 3
    std::fstream f(dir + "/step-3.ckpt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  fs::resize_file(dir + "/step-2.ckpt", fs::file_size(dir + "/step-2.ckpt") - 5);  // truncated
  auto c = load_newest_checkpoint(dir);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->learner_steps, 1u);
}

TEST(CheckpointTest, LoadingOneFileNamesWhatIsWrong) {
  const std::string dir = fresh_folder("one");
  const std::string path = save_checkpoint(dir, sample(4), 3);
  EXPECT_EQ(load_checkpoint(path).learner_steps, 4u);
  fs::resize_file(path, 30);
  try {
    load_checkpoint(path);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": truncated"), std::string::npos) << e.what();
  }
}

TEST(CheckpointTest, NoCheckpointIsNothing) {
  EXPECT_FALSE(load_newest_checkpoint(fresh_folder("empty")));
}

}  // namespace
}  // namespace pronghorn::learner
