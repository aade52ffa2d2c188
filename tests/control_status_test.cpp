// `pronghorn status` as a user reads it, against a real `pronghorn train`:
// the job's state, progress toward run.total_steps, the target, the
// learning rate, a health line when actors keep dying, and `--watch`
// ending with when and how the job ended.
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/testing/control_job.h"

namespace {

using namespace pronghorn;
using namespace pronghorn::testing;

// A job that ends on its own while a test watches it: some seconds of
// CartPole on one actor.
constexpr int kWatchedSteps = 6'000'000;

// `status` shows the state, the learning rate, progress toward
// run.total_steps and the target; `status --watch` ends, when the job
// reaches its total steps, saying when and how it ended, and its exit line.
TEST(ControlTest, StatusShowsStateAndProgressAndWatchEndsWithHowTheJobEnded) {
  Job job({"--set", "run.total_steps=" + std::to_string(kWatchedSteps), "--set",
           "run.target_return=10000", "--set", "run.report_interval_s=0.2"});
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  auto [code, out] = shell(std::string(PRONGHORN_BIN) + " status --run-dir " + job.dir);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\nstate          running\n"), std::string::npos) << out;
  EXPECT_NE(
      out.find("\ntarget         mean return 10000 on evaluation and over the last 100 episodes\n"),
      std::string::npos)
      << out;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(
      out, m,
      std::regex("\nprogress       \\d+ of " + std::to_string(kWatchedSteps) +
                 " env steps \\(\\d+\\.\\d%\\), ETA \\d+ (s|min \\d\\d s|h \\d\\d min)\n")))
      << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"(\nlearning rate  (\S+)\n)"))) << out;
  EXPECT_GT(std::stod(m[1]), 0) << out;
  EXPECT_EQ(out.find("\nhealth"), std::string::npos) << "all is well: " << out;
  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + " status --json --run-dir " + job.dir);
  EXPECT_NE(out.find(R"("state": "running")"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("total_steps": )" + std::to_string(kWatchedSteps)), std::string::npos);

  std::tie(code, out) =
      shell(std::string(PRONGHORN_BIN) + " status --watch --interval 0.2 --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
  EXPECT_NE(out.find("\nstate          finished: reached run.total_steps\n"), std::string::npos)
      << "the last table is the finished job's";
  const size_t ended = out.rfind("job ended at ");
  ASSERT_NE(ended, std::string::npos) << out;
  const std::string tail = out.substr(ended);
  EXPECT_TRUE(std::regex_match(
      tail, std::regex(R"(job ended at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: finished: reached )"
                       R"(run.total_steps at \d+ env steps, mean return \d+\.\d\d\n)"
                       R"(exit 0 stopped after \S+ s and \d+ env steps, mean return .*\n)")))
      << tail;

  // The run directory of the ended job answers for itself: how it ended and
  // its last report, exit 0, though no learner is there to ask.
  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + " status --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(std::regex_search(
      out, m,
      std::regex(R"(\nstate          ended, exit 0: stopped after \S+ s and \d+ env steps)")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, m, std::regex(R"(\nlast report    \d+ env steps, \d+ learner steps, after \d+ s\n)")))
      << out;
  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + " status --json --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(R"("state": "ended", "exit_code": 0, "exit_reason": "stopped after )"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("last_metrics": {"run_name": )"), std::string::npos) << out;
}

// Actors that keep dying: `status` says so on a health line (and the
// metrics line carries it), while the job goes on.
TEST(ControlTest, StatusNamesActorsThatKeepDyingOnAHealthLine) {
  Job job({"--set", "run.report_interval_s=0.1"});
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  for (uint64_t restarts = 1; restarts <= 3; ++restarts) {
    std::vector<pid_t> actors;
    ASSERT_TRUE(wait_for([&] { return (actors = children_of(job.pid)).size() == 1; }));
    ASSERT_EQ(kill(actors[0], SIGKILL), 0);
    ASSERT_TRUE(wait_for([&] { return get_status(*stub).actor_restarts() >= restarts; }));
  }
  ASSERT_TRUE(wait_for([&] { return !get_status(*stub).health().empty(); }))
      << "three restarts within a minute";
  auto [code, out] = shell(std::string(PRONGHORN_BIN) + " status --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\nhealth         actors keep dying: 3 restarts in the last 60 s"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\nstate          running\n"), std::string::npos) << out;
  EXPECT_TRUE(wait_for([&] {
    return slurp(job.dir + "/metrics.jsonl").find("\"health\": \"actors keep dying") !=
           std::string::npos;
  }));
}

}  // namespace
