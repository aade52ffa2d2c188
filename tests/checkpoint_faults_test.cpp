// `pronghorn train --resume` against a checkpoints folder that holds more
// than whole checkpoints: a FIFO, a link to /dev/zero, a directory and a
// checksum-valid file of NaN weights, each named newer than the one good
// checkpoint. The job must resume from the good one and finish, or, with
// nothing good, exit 1 naming every file; never hang (every run has a deadline).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "learner/checkpoint.h"
#include "tests/testing/job.h"

namespace {

namespace fs = std::filesystem;
using namespace pronghorn::testing;

const std::string kBin = PRONGHORN_BIN;

// `pronghorn train …` killed after 60 s: a hang is a failure, not a stuck ctest.
std::pair<int, std::string> train(const std::string& args) {
  return shell("timeout -k 5 60 " + kBin + " --log-level warn train " + args);
}

struct FaultRun {
  std::string name = "ckpt-faults-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string dir = ::testing::TempDir() + "/" + name;
  std::string checkpoints = dir + "/checkpoints";

  // A short job that ends by itself with one checkpoint, at `steps` env steps or a little more.
  std::string train_until(int steps) {
    fs::remove_all(dir);
    auto [code, out] = train("--run-dir " + dir + " --set run.name=" + name +
                             " --set run.total_steps=" + std::to_string(steps) +
                             " --set run.target_return=0 --set actor.count=1"
                             " --set server.address=127.0.0.1:0 --set server.metrics_port=-1");
    EXPECT_EQ(code, 0) << out;
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(checkpoints)) files.push_back(e.path());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? "" : files[0];
  }
};

std::string name_at(uint64_t env_steps) {
  std::string digits = std::to_string(env_steps);
  return "env-steps-" + std::string(20 - digits.size(), '0') + digits + ".ckpt";
}

uint64_t env_steps_of(const std::string& path) {  // from the name
  const std::string name = fs::path(path).filename();
  return std::stoull(name.substr(10, 20));
}

// A copy of the checkpoint at `from` whose weights hold a NaN and whose
// counters say `env_steps`, with its checksum made right, as `to`.
void write_nan_copy(const std::string& from, uint64_t env_steps, const std::string& to) {
  pronghorn::learner::Checkpoint c = pronghorn::learner::load_checkpoint(from);
  ASSERT_GT(c.parameters.size(), 7u);
  c.counters.env_steps = env_steps;
  c.parameters[7] = std::nanf("");
  pronghorn::learner::write_checkpoint_file(to, c);
}

TEST(CheckpointFaultsTest, ResumeSkipsWhatIsNotAGoodCheckpointNamedNewerAndFinishes) {
  FaultRun run;
  const std::string good = run.train_until(2000);
  ASSERT_FALSE(good.empty());
  const uint64_t at = env_steps_of(good);
  const std::string nan = run.checkpoints + "/" + name_at(at + 100000);
  const std::string folder = run.checkpoints + "/" + name_at(at + 200000);
  const std::string zero = run.checkpoints + "/" + name_at(at + 300000);
  const std::string fifo = run.checkpoints + "/" + name_at(at + 400000);
  write_nan_copy(good, at + 100000, nan);
  fs::create_directory(folder);
  fs::create_symlink("/dev/zero", zero);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);

  auto [code, out] =
      train("--resume " + run.dir + " --set run.total_steps=" + std::to_string(at + 2000));
  EXPECT_EQ(code, 0) << out;  // 124: it hung on the FIFO
  const std::string log = slurp(run.dir + "/train.log");
  EXPECT_NE(log.find("checkpoint " + fifo + " skipped: a FIFO, not a checkpoint file"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("checkpoint " + zero + " skipped: a character device, not a checkpoint file"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("checkpoint " + folder + " skipped: a directory, not a checkpoint file"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("checkpoint " + nan + " skipped: parameter 7 of "), std::string::npos) << log;
  EXPECT_NE(log.find(" is nan"), std::string::npos) << log;
  // The resumed run went on from the good one and wrote its own; nothing of
  // what it skipped was touched.
  EXPECT_GT(last_metric(run.dir, "env_steps"), static_cast<double>(at));
  size_t newer = 0;
  for (const auto& e : fs::directory_iterator(run.checkpoints)) {
    const uint64_t steps = env_steps_of(e.path());
    if (steps > at && steps < at + 100000) ++newer;
  }
  EXPECT_EQ(newer, 1u) << "the resumed run's final checkpoint";
  EXPECT_TRUE(fs::exists(nan) && fs::is_directory(folder) && fs::is_symlink(zero) &&
              fs::is_fifo(fifo));
}

TEST(CheckpointFaultsTest, ResumeWithNothingGoodExitsOneNamingTheFolderAndEachFile) {
  FaultRun run;
  const std::string good = run.train_until(1000);
  ASSERT_FALSE(good.empty());
  {  // one byte flipped in the middle of the only checkpoint
    std::string bytes = slurp(good);
    bytes[bytes.size() / 2] ^= 0x5a;
    std::ofstream(good, std::ios::binary | std::ios::trunc) << bytes;
  }
  const std::string fifo = run.checkpoints + "/" + name_at(env_steps_of(good) + 1);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto [code, out] = train("--resume " + run.dir);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("resume: no valid checkpoint in " + run.checkpoints + ": " +
                     fs::path(fifo).filename().string() + ": a FIFO, not a checkpoint file; " +
                     fs::path(good).filename().string() + ": checksum mismatch"),
            std::string::npos)
      << out;
  EXPECT_TRUE(fs::exists(good)) << "a failed resume removes nothing";
}

}  // namespace
