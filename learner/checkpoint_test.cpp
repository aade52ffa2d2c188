#include "learner/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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
  c.counters = {step * 1000, step, step * 3, step + 1};
  c.parameters = {1.5f, -2.0f, static_cast<float>(step)};
  c.parameter_layout = {{"w", {3}}};
  c.optimizer = std::string("opt\0state", 9);
  c.rng = "rng";
  return c;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// Kills the test (SIGALRM) instead of letting a read that blocks hang it.
struct Deadline {
  explicit Deadline(unsigned seconds) { alarm(seconds); }
  ~Deadline() { alarm(0); }
};

TEST(CheckpointTest, RoundTripsEveryField) {
  const std::string dir = fresh_folder("roundtrip");
  std::string path = save_checkpoint(dir, sample(7), 3);
  EXPECT_EQ(path, dir + "/env-steps-00000000000000007000.ckpt");
  std::string loaded_path;
  auto c = load_newest_checkpoint(dir, &loaded_path);
  ASSERT_TRUE(c);
  EXPECT_EQ(loaded_path, path);
  EXPECT_EQ(c->counters.env_steps, 7000u);
  EXPECT_EQ(c->counters.learner_steps, 7u);
  EXPECT_EQ(c->counters.episodes, 21u);
  EXPECT_EQ(c->counters.policy_version, 8u);
  EXPECT_EQ(c->parameters, sample(7).parameters);
  EXPECT_EQ(c->parameter_layout, sample(7).parameter_layout);
  EXPECT_EQ(c->optimizer, sample(7).optimizer);
  EXPECT_EQ(c->rng, "rng");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(CheckpointTest, NamesSortAsTheirEnvStepsSoTheLastNameIsTheNewest) {
  const std::string dir = fresh_folder("names");
  EXPECT_EQ(checkpoint_file_name(1234560), "env-steps-00000000000001234560.ckpt");
  EXPECT_EQ(checkpoint_file_name(UINT64_MAX).size(), checkpoint_file_name(0).size());
  for (uint64_t step : {9, 10, 99, 100, 1234}) save_checkpoint(dir, sample(step), 10);
  EXPECT_EQ(names_in(dir).back(), checkpoint_file_name(1234000)) << "what `ls | tail -1` picks";
  EXPECT_EQ(checkpoint_candidates(dir).front(), dir + "/" + checkpoint_file_name(1234000));
}

TEST(CheckpointTest, KeepsTheNewestOnes) {
  const std::string dir = fresh_folder("keep");
  for (uint64_t step : {1, 2, 3, 10, 11}) save_checkpoint(dir, sample(step), 3);
  EXPECT_EQ(names_in(dir),
            (std::vector<std::string>{checkpoint_file_name(3000), checkpoint_file_name(10000),
                                      checkpoint_file_name(11000)}));
}

TEST(CheckpointTest, EarlierNamesStillLoadAndCountAsOlderThanAnyCurrentName) {
  const std::string dir = fresh_folder("earlier");
  // step-<learner_steps>.ckpt, as learners before env-steps names wrote them.
  fs::rename(save_checkpoint(dir, sample(90), 5), dir + "/step-90.ckpt");
  fs::rename(save_checkpoint(dir, sample(100), 5), dir + "/step-100.ckpt");
  std::string path;
  ASSERT_TRUE(load_newest_checkpoint(dir, &path));
  EXPECT_EQ(path, dir + "/step-100.ckpt") << "by the number, not the text (step-90 > step-100)";
  save_checkpoint(dir, sample(2), 5);  // a resumed run writes current names from then on
  EXPECT_EQ(checkpoint_candidates(dir),
            (std::vector<std::string>{dir + "/" + checkpoint_file_name(2000),
                                      dir + "/step-100.ckpt", dir + "/step-90.ckpt"}));
  save_checkpoint(dir, sample(3), 2);
  EXPECT_EQ(names_in(dir),
            (std::vector<std::string>{checkpoint_file_name(2000), checkpoint_file_name(3000)}))
      << "earlier names are the oldest, removed first";
}

TEST(CheckpointTest, KeepingNeverRemovesTheFileJustWrittenNorWhatItDidNotWrite) {
  const std::string dir = fresh_folder("keep-safe");
  // A newer file that is not valid (a resume skipped it and went back).
  save_checkpoint(dir, sample(50), 1);
  std::ofstream(dir + "/" + checkpoint_file_name(50000), std::ios::trunc) << "garbage";
  fs::create_directory(dir + "/" + checkpoint_file_name(60000));
  ASSERT_EQ(mkfifo((dir + "/" + checkpoint_file_name(70000)).c_str(), 0600), 0);
  save_checkpoint(dir, sample(4), 1);
  save_checkpoint(dir, sample(5), 1);
  const std::vector<std::string> names = names_in(dir);
  EXPECT_EQ(names,
            (std::vector<std::string>{checkpoint_file_name(5000), checkpoint_file_name(50000),
                                      checkpoint_file_name(60000), checkpoint_file_name(70000)}));
  std::string path;
  auto c = load_newest_checkpoint(dir, &path);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->counters.env_steps, 5000u) << "the one just written survives keep = 1";
}

TEST(CheckpointTest, CorruptAndTruncatedFilesAreSkippedForTheNewestValidOne) {
  const std::string dir = fresh_folder("corrupt");
  save_checkpoint(dir, sample(1), 5);
  const std::string second = save_checkpoint(dir, sample(2), 5);
  const std::string third = save_checkpoint(dir, sample(3), 5);
  {  // flip one byte in the middle of the third
    std::fstream f(third, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  fs::resize_file(second, fs::file_size(second) - 5);  // truncated
  auto c = load_newest_checkpoint(dir);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->counters.learner_steps, 1u);
}

TEST(CheckpointTest, AFifoADeviceAndADirectoryAreRefusedWithoutBlocking) {
  const std::string dir = fresh_folder("not-files");
  fs::create_directories(dir);
  const std::string fifo = dir + "/" + checkpoint_file_name(3);
  const std::string zero = dir + "/" + checkpoint_file_name(2);
  const std::string folder = dir + "/" + checkpoint_file_name(1);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", zero);
  fs::create_directory(folder);
  Deadline deadline(20);
  std::string why;
  EXPECT_FALSE(read_checkpoint(fifo, &why));
  EXPECT_EQ(why, "a FIFO, not a checkpoint file");
  EXPECT_FALSE(read_checkpoint(zero, &why));
  EXPECT_EQ(why, "a character device, not a checkpoint file");
  EXPECT_FALSE(read_checkpoint(folder, &why));
  EXPECT_EQ(why, "a directory, not a checkpoint file");
  EXPECT_EQ(checkpoint_candidates(dir), (std::vector<std::string>{fifo, zero, folder}));
  EXPECT_FALSE(load_newest_checkpoint(dir));
}

// The file of `c` with its checksum made right, the way a crafted file would be.
std::string crafted(const std::string& dir, const Checkpoint& c) {
  return save_checkpoint(dir, c, 100);
}

TEST(CheckpointTest, FieldsThatPassTheChecksumMustStillBeSane) {
  const std::string dir = fresh_folder("crafted");
  auto refused = [&](const Checkpoint& c, const std::string& reason) {
    const std::string path = crafted(dir, c);
    std::string why;
    EXPECT_FALSE(read_checkpoint(path, &why)) << reason;
    EXPECT_NE(why.find(reason), std::string::npos) << why;
    fs::remove(path);
  };
  Checkpoint c = sample(4);
  c.counters = {UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
  refused(c, "env_steps = 18446744073709551615: more than any run takes");
  c = sample(4);
  c.counters.learner_steps = c.counters.env_steps + 1;
  c.counters.policy_version = c.counters.learner_steps + 1;
  refused(c, "learner_steps = 4001 with env_steps = 4000");
  c = sample(4);
  c.counters.learner_steps = 0;
  refused(c, "learner_steps = 0 with env_steps = 4000");
  c = sample(4);
  c.counters.episodes = c.counters.env_steps + 1;
  refused(c, "episodes = 4001 exceeds env_steps = 4000");
  c = sample(4);
  c.counters.policy_version = 3;
  refused(c, "policy_version = 3 with learner_steps = 4");
  c.counters.policy_version = UINT64_MAX;
  refused(c, "policy_version = 18446744073709551615");
  c = sample(4);
  c.parameters[1] = std::nanf("");
  refused(c, "parameter 1 of 3 is nan");
  c.parameters[1] = INFINITY;
  refused(c, "parameter 1 of 3 is inf");
  c.parameters.clear();
  c.parameter_layout.clear();
  refused(c, "no parameters");
  // A valid file under a name that says otherwise would be sorted wrongly.
  const std::string path = crafted(dir, sample(4));
  fs::rename(path, dir + "/" + checkpoint_file_name(999999));
  std::string why;
  EXPECT_FALSE(read_checkpoint(dir + "/" + checkpoint_file_name(999999), &why));
  EXPECT_EQ(why, "its name says 999999 env steps, it holds 4000");
}

TEST(CheckpointTest, SizesInTheFileAreNeverTrustedBeyondTheFile) {
  const std::string dir = fresh_folder("sizes");
  const std::string path = crafted(dir, sample(4));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto write = [&](const std::string& b) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << b;
  };
  std::string why;
  std::string huge = bytes;  // the header promises an exabyte
  const uint64_t exabyte = uint64_t{1} << 60;
  std::memcpy(huge.data() + 8, &exabyte, 8);
  write(huge);
  EXPECT_FALSE(read_checkpoint(path, &why));
  EXPECT_NE(why.find("truncated: its header promises 1152921504606846976 bytes"), std::string::npos)
      << why;
  write(bytes);
  EXPECT_FALSE(read_checkpoint(path, &why, bytes.size() - 1));
  EXPECT_NE(why.find("more than the"), std::string::npos) << why;
  EXPECT_TRUE(read_checkpoint(path, &why, bytes.size()));
}

TEST(CheckpointTest, LoadingOneFileNamesWhatIsWrong) {
  const std::string dir = fresh_folder("one");
  const std::string path = save_checkpoint(dir, sample(4), 3);
  EXPECT_EQ(load_checkpoint(path).counters.learner_steps, 4u);
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
  EXPECT_TRUE(checkpoint_candidates(fresh_folder("missing")).empty());
}

}  // namespace
}  // namespace pronghorn::learner
