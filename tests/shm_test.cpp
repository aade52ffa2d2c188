// The shared memory of real `pronghorn train` jobs in the real /dev/shm: a
// run never removes another live job's segments (not even of a run whose
// name starts with its own), a SIGKILLed learner's segments are removed by
// `pronghorn clean` or by the next learner to start, whatever its run, and a
// nearly full /dev/shm is one line and exit status 1 at start, not a SIGBUS.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;

// A prefix for this test's run names and files.
std::string test_tag() {
  return "shm-test-" + std::to_string(getpid()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

bool in_dev_shm(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm/" + name).c_str(), &st) == 0;
}

// One training job, SIGTERMed and reaped when the test leaves by any path.
struct Job {
  std::string run, dir;
  pid_t pid = -1;

  explicit Job(std::string name) : run(std::move(name)), dir(::testing::TempDir() + "/" + run) {
    std::filesystem::remove_all(dir);
    std::vector<std::string> args = job_args(dir, run);
    args.insert(args.end(), {"--set", "run.report_interval_s=0.2"});
    pid = start_pronghorn(args);
  }
  ~Job() {
    if (pid > 0 && kill(pid, SIGTERM) == 0) wait_exit(pid);
  }
  double env_steps() const { return last_metric(dir, "env_steps"); }
  bool training() const {
    return wait_for([&] { return env_steps() > 0; });
  }
  int stop() {
    kill(pid, SIGTERM);
    const int status = wait_exit(pid);
    pid = -1;
    return status;
  }
};

// The segment names the learner `pid` gave its (first) actor: whatever the
// naming, the segments the job depends on.
std::vector<std::string> attached_segments(pid_t pid) {
  const std::vector<pid_t> actors = children_of(pid);
  if (actors.empty()) return {};
  // Its arguments apart, as exec leaves them, or as one line (a zygote's
  // fork shows its own that way: fleet/process_title.h).
  std::string cmdline = slurp("/proc/" + std::to_string(actors[0]) + "/cmdline");
  for (char& c : cmdline) c = c == '\0' ? ' ' : c;
  std::istringstream in(cmdline);
  std::vector<std::string> args;
  for (std::string arg; in >> arg;) args.push_back(arg);
  std::vector<std::string> names;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--ring" || args[i] == "--slab") names.push_back(args[i + 1].substr(1));
  }
  return names;
}

TEST(ShmTest, StartingRunXLeavesTheSegmentsOfALiveJobXDashDigitsAlone) {
  const std::string x = test_tag();
  // Digits no pid can have (pid_max ≤ 2^22): read as a pid, they are dead.
  Job other(x + "-99999999");
  ASSERT_TRUE(other.training());
  const std::vector<std::string> segments = attached_segments(other.pid);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(leftover_segments(other.run).size(), 2u);

  Job job(x);
  ASSERT_TRUE(job.training()) << "X started, and swept /dev/shm as it did";
  for (const std::string& name : segments) EXPECT_TRUE(in_dev_shm(name)) << name;
  EXPECT_EQ(leftover_segments(other.run).size(), 2u);

  // A restarted actor attaches by name: the other job trains on only if its
  // segments are still there.
  const std::vector<pid_t> actors = children_of(other.pid);
  ASSERT_EQ(actors.size(), 1u);
  ASSERT_EQ(kill(actors[0], SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return last_metric(other.dir, "actor_restarts") >= 1; }));
  const double steps = other.env_steps();
  EXPECT_TRUE(wait_for([&] { return other.env_steps() > steps + 1e5; }, 20s))
      << "the other job keeps training with its restarted actor";

  EXPECT_EQ(job.stop(), 0);
  EXPECT_EQ(other.stop(), 0);
  EXPECT_TRUE(leftover_segments(job.run).empty());
  EXPECT_TRUE(leftover_segments(other.run).empty());
}

std::vector<std::string> sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

// SIGKILLs the job's learner and returns which of its `segments` are in
// /dev/shm the moment it is dead (any learner starting later may remove
// them); then waits for its actors, which notice and exit on their own.
std::vector<std::string> kill_learner(Job& job, const std::vector<std::string>& segments) {
  const std::vector<pid_t> actors = children_of(job.pid);
  EXPECT_EQ(kill(job.pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit(job.pid), 128 + SIGKILL);
  job.pid = -1;
  std::vector<std::string> left;
  for (const std::string& name : segments) {
    if (in_dev_shm(name)) left.push_back(name);
  }
  for (pid_t actor : actors) {
    EXPECT_TRUE(wait_for([&] { return kill(actor, 0) != 0; }, 15s)) << "actor " << actor;
  }
  return left;
}

TEST(ShmTest, CleanRemovesAKilledLearnersSegmentsAndSaysSo) {
  const std::string tag = test_tag();
  Job dead(tag + "-dead"), live(tag + "-live");
  ASSERT_TRUE(dead.training() && live.training());
  const pid_t dead_pid = dead.pid, live_pid = live.pid;
  const std::vector<std::string> segments = attached_segments(dead.pid);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(sorted(leftover_segments(dead.run)), sorted(segments)) << "named for owner and run";
  EXPECT_EQ(kill_learner(dead, segments), segments) << "a killed learner cannot remove its own";

  // A learner of a test running in parallel may sweep them first (it removes
  // every dead learner's segments at start): what always holds is that they
  // are gone; when clean removed them (always, run alone), it says whose.
  auto [code, out] = shell(std::string(PRONGHORN_BIN) + " clean");
  EXPECT_EQ(code, 0) << out;
  for (const std::string& name : segments) EXPECT_FALSE(in_dev_shm(name)) << name;
  if (out.find("removed /" + segments[0] + " (") != std::string::npos) {
    EXPECT_NE(out.find("removed /" + segments[1] + " ("), std::string::npos) << out;
    EXPECT_NE(out.find("learner " + std::to_string(dead_pid) + " of run " + dead.run + " is gone"),
              std::string::npos)
        << out;
  }
  EXPECT_NE(out.find("kept "), std::string::npos) << out;
  EXPECT_NE(out.find(std::to_string(live_pid) + " (run " + live.run + ")"), std::string::npos)
      << "the live job's segments are kept, and the summary says whose:\n"
      << out;
  EXPECT_EQ(leftover_segments(live.run).size(), 2u);
  EXPECT_TRUE(leftover_segments(dead.run).empty());

  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + " clean");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.find("removed /pronghorn." + std::to_string(dead_pid) + "."), std::string::npos)
      << "nothing of the dead learner is left to remove:\n"
      << out;
  EXPECT_EQ(live.stop(), 0);
}

TEST(ShmTest, TheNextLearnerToStartRemovesADeadLearnersSegmentsOfAnyRun) {
  const std::string tag = test_tag();
  Job dead(tag + "-dead");
  ASSERT_TRUE(dead.training());
  const std::vector<std::string> segments = attached_segments(dead.pid);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(sorted(leftover_segments(dead.run)), sorted(segments)) << "named for owner and run";
  EXPECT_EQ(kill_learner(dead, segments), segments) << "a killed learner cannot remove its own";

  Job next(tag + "-next");  // another run
  ASSERT_TRUE(next.training());
  for (const std::string& name : segments) {
    EXPECT_FALSE(in_dev_shm(name)) << name << ": removed when the next learner started";
  }
  EXPECT_TRUE(leftover_segments(dead.run).empty());
  EXPECT_EQ(leftover_segments(next.run).size(), 2u);
  EXPECT_EQ(next.stop(), 0);
  EXPECT_TRUE(leftover_segments(next.run).empty());
}

TEST(ShmTest, ANearlyFullDevShmIsOneLineAndExitStatus1AtStart) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs over /dev/shm";
  const std::string mount_small =
      "unshare -m --propagation private sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm";
  if (shell(mount_small + "'").first != 0) {
    GTEST_SKIP() << "unshare -m or mount -t tmpfs not permitted here";
  }
  const std::string tag = test_tag(), dir = ::testing::TempDir() + "/" + tag;
  const std::string err = ::testing::TempDir() + "/" + tag + ".err";
  std::filesystem::remove_all(dir);
  // 1 MiB of which 768 KiB are taken: the ring (about 350 KiB) does not fit.
  std::string command = mount_small + " && head -c 768k /dev/zero > /dev/shm/filler && exec " +
                        std::string(PRONGHORN_BIN) + " --log-level warn";
  for (const std::string& arg : job_args(dir, tag)) command += " " + arg;
  command += " 2>" + err + "'";
  const pid_t pid = spawn("/bin/sh", {"-c", "exec " + command});
  ASSERT_GT(pid, 0);
  StopOnExit guard{pid};
  int status = 0;
  const bool ended = wait_for([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 15s);
  ASSERT_TRUE(ended) << "the learner ends at start; it does not run on while actors die:\n"
                     << slurp(err);
  guard.pid = -1;
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1);
  const std::string text = slurp(err);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_TRUE(std::regex_match(text, std::regex("pronghorn: ring /pronghorn\\.[0-9]+\\.[0-9]+\\."
                                                "ring\\." +
                                                tag +
                                                ": needs [0-9.]+ KiB in "
                                                "/dev/shm, 256\\.0 KiB free\n")))
      << text;
}

}  // namespace
