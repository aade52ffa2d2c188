#include "core/run_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/files.h"

namespace pronghorn {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  std::string path =
      ::testing::TempDir() + "/run-dir-test-" + std::to_string(getpid()) + "/" + name;
  fs::remove_all(path);
  return path;
}

std::string refusal(const std::string& path, RunDirectory::Mode mode) {
  try {
    RunDirectory run(path, mode);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(RunDirectoryTest, CreatedPrivateAndLockedForItsLife) {
  const std::string path = temp_dir("locked");
  {
    RunDirectory run(path, RunDirectory::Mode::kNew);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_EQ(run.name(), "locked");
    const std::string why = refusal(path, RunDirectory::Mode::kResume);
    EXPECT_NE(why.find("in use by another job (pid " + std::to_string(getpid()) + ")"),
              std::string::npos)
        << why;
  }
  RunDirectory again(path, RunDirectory::Mode::kResume);  // unlocked when the first went
}

TEST(RunDirectoryTest, ANameInUseIsRefusedUnlessResumedAndAGeneratedOneGivesWay) {
  const std::string path = temp_dir("taken");
  { RunDirectory run(path, RunDirectory::Mode::kNew); }
  std::ofstream(path + "/metrics.jsonl") << "{}\n";
  const std::string why = refusal(path, RunDirectory::Mode::kNew);
  EXPECT_NE(why.find("holds another run (metrics.jsonl); continue it with --resume"),
            std::string::npos)
      << why;
  RunDirectory suffixed(path, RunDirectory::Mode::kNewOrSuffixed);
  EXPECT_EQ(suffixed.path(), path + "-2");
  RunDirectory third(path, RunDirectory::Mode::kNewOrSuffixed);
  EXPECT_EQ(third.path(), path + "-3");
  EXPECT_NE(refusal(temp_dir("absent"), RunDirectory::Mode::kResume).find("No such file"),
            std::string::npos);
}

TEST(RunDirectoryTest, AnEmptyDirectoryOfThisUserIsTakenAndCleanedIfTheJobNeverStarts) {
  const std::string path = temp_dir("empty");
  fs::create_directories(path);
  chmod(path.c_str(), 0755);
  {
    RunDirectory run(path, RunDirectory::Mode::kNew);
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::ofstream(path + "/config.toml") << "x";
    run.remove_if_new();
  }
  EXPECT_TRUE(fs::is_empty(path)) << "found empty, left empty";
  const std::string created = temp_dir("created");
  {
    RunDirectory run(created, RunDirectory::Mode::kNew);
    run.remove_if_new();
  }
  EXPECT_FALSE(fs::exists(created));
  const std::string resumed = temp_dir("resumed");
  fs::create_directories(resumed);
  std::ofstream(resumed + "/config.toml") << "x";
  {
    RunDirectory run(resumed, RunDirectory::Mode::kResume);
    run.remove_if_new();
  }
  EXPECT_TRUE(fs::exists(resumed + "/config.toml")) << "a resumed run is never removed";
}

TEST(RunDirectoryTest, AnotherUsersDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  const std::string path = temp_dir("foreign");
  fs::create_directories(path);
  ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
  for (auto mode : {RunDirectory::Mode::kNew, RunDirectory::Mode::kResume}) {
    const std::string why = refusal(path, mode);
    EXPECT_NE(why.find("owned by uid 65534, not by this user"), std::string::npos) << why;
  }
}

TEST(FilesTest, AtomicWriteReplacesWholeAndExclusiveCreateNeverReplaces) {
  const std::string dir = temp_dir("files");
  fs::create_directories(dir);
  const std::string path = dir + "/f";
  EXPECT_TRUE(write_file_atomically(path, "one", 0600));
  EXPECT_TRUE(write_file_atomically(path, "two", 0640));
  EXPECT_EQ(read_file(path), "two");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_FALSE(write_file_atomically(path, "three", 0600, Replace::kNo));
  EXPECT_EQ(read_file(path), "two");
  EXPECT_THROW(write_file_atomically(dir + "/no/such/folder/f", "x"), Error);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "no temporary file is left";
}

}  // namespace
}  // namespace pronghorn
