// deploy/local/run.sh against real processes: N learner ranks and M
// actor-only nodes on this machine train to the target, the node's unrolls
// in the script's last line, and Ctrl-C stops
// every process the script started and leaves no shared memory.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;

struct LocalJob {
  std::string name = "deploy-local-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string runs = ::testing::TempDir() + "/" + name + "-runs";
  std::string job = runs + "/" + name;

  LocalJob() { std::filesystem::remove_all(runs); }
  ~LocalJob() { std::filesystem::remove_all(runs); }

  // The script's command line with its variables.
  std::string command(const std::string& args = "") const {
    return "env N=2 M=1 PROCESSES_PER_NODE=1 ACTORS_PER_RANK=1 PRONGHORN=" +
           std::string(PRONGHORN_BIN) + " RUN_DIR=" + runs + " RUN_NAME=" + name + " bash " +
           std::string(DEPLOY_DIR) + "/local/run.sh --set server.metrics_port=-1 " + args;
  }
  // Shared memory of any of the job's processes: its ranks' and its node's.
  std::vector<std::string> segments() const {
    std::vector<std::string> found = leftover_segments(name);
    for (const std::string& other : {name + "-rank1", std::string("node-local-node0")}) {
      for (const std::string& s : leftover_segments(other)) found.push_back(s);
    }
    return found;
  }
};

// Every process whose command line holds `text`.
std::vector<pid_t> processes_with(const std::string& text) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp(entry.path().string() + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(text) != std::string::npos) found.push_back(std::stoi(pid));
  }
  return found;
}

TEST(DeployLocalTest, TwoRanksAndOneActorOnlyNodeTrainCartPoleToTheTarget) {
  LocalJob local;
  const auto [code, out] = shell(local.command() + " 2>&1");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("status --run-dir " + local.job), std::string::npos) << out;
  EXPECT_NE(out.find("rank 0 exited 0; solved: mean return"), std::string::npos) << out;
  // The last line shows the node contributing: unrolls it sent that the learner acked.
  std::smatch tally;
  const std::string last = lines_of(out).empty() ? "" : lines_of(out).back();
  ASSERT_TRUE(std::regex_search(
      last, tally, std::regex(R"(; node local-node0: unrolls committed \d+ = acked (\d+) \+)")))
      << out;
  EXPECT_GT(std::stoull(tally[1]), 0u) << last;
  const std::string node = slurp(local.runs + "/" + local.name + ".logs/node0.log");
  EXPECT_NE(node.find("the job "), std::string::npos) << "the node heard the job end:\n" << node;
  EXPECT_NE(node.find("unrolls committed"), std::string::npos) << node;
  EXPECT_TRUE(processes_with(local.name).empty());
  EXPECT_TRUE(local.segments().empty());
}

TEST(DeployLocalTest, CtrlCStopsEveryProcessItStartedAndLeavesNoSharedMemory) {
  LocalJob local;
  const std::string log = local.runs + ".out";
  const pid_t script = spawn("/bin/sh", {"-c", "exec " +
                                                   local.command("--set run.target_return=0 --set "
                                                                 "run.total_steps=1000000000") +
                                                   " >" + log + " 2>&1"});
  ASSERT_GT(script, 0);
  StopOnExit guard{script};
  // Running: both ranks stepping and the node joined (its log says so).
  ASSERT_TRUE(wait_for(
      [&] {
        return slurp(local.runs + "/" + local.name + ".logs/node0.log").find(" joined job ") !=
               std::string::npos;
      },
      90s))
      << slurp(log);
  EXPECT_GE(processes_with(local.name).size(), 3u) << "2 ranks and a node";
  kill(script, SIGINT);
  const int status = wait_exit(script);
  guard.pid = -1;
  EXPECT_EQ(status, 130) << slurp(log);
  EXPECT_TRUE(processes_with(local.name).empty()) << "the script left processes behind";
  EXPECT_TRUE(processes_with("node-local-node0").empty()) << "the node's actors left behind";
  EXPECT_TRUE(local.segments().empty());
  std::filesystem::remove(log);
}

}  // namespace
