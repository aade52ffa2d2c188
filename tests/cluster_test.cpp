// Several learners training one model, as real `pronghorn train` processes
// (issue 16), ranks on loopback sharing one run directory: they train
// together to identical parameters (under run.deterministic, the same
// checkpoints every job); a killed peer ends the others with exit 75
// within distributed.timeout_s and a few seconds, leaving no actor or shared
// memory, and the group resumes; rank 0's status shows every rank; placement
// may come from torchrun's environment. A stopped or partitioned peer and the
// refusals at start are in cluster_faults_test.cpp.
#include "tests/testing/cluster.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "tests/testing/cluster_job.h"
#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
using Clock = std::chrono::steady_clock;

// --- Training together ---------------------------------------------------

TEST(ClusterTest, TwoRanksTrainCartPoleToTheTargetWithIdenticalParameters) {
  Cluster job(2);  // the default job: CartPole to a mean return of 475
  const auto start = Clock::now();
  std::vector<RankProcess> ranks = job.start_all();
  ASSERT_EQ(ranks.size(), 2u) << "rank 0 wrote no rendezvous.address\n" << ranks[0].output();
  ASSERT_NO_FATAL_FAILURE(expect_every_rank_ended(ranks, wait_all(ranks, 80s), "solved: "));
  // backend "auto" on a CPU learner is Gloo.
  EXPECT_NE(slurp(job.train_log(0)).find("backend gloo"), std::string::npos)
      << slurp(job.train_log(0));
  const ChecksumLine line = expect_identical_replicas(job);
  std::cout << "[ cluster  ] solved on 2 ranks in " << seconds_since(start) << " s, "
            << line.learner_steps << " learner steps\n";
  // The trained env steps add up: each rank counts the job's total, and its
  // own share as local_env_steps.
  const double total = job.metric(0, "env_steps");
  EXPECT_GT(total, 0);
  EXPECT_EQ(job.metric(1, "env_steps"), total);
  EXPECT_GT(job.metric(1, "local_env_steps"), 0);
  EXPECT_EQ(job.metric(0, "local_env_steps") + job.metric(1, "local_env_steps"), total);
}

TEST(ClusterTest, ThreeRanksRunFixedStepsWithIdenticalParameters) {
  constexpr double kTotalSteps = 150000;
  Cluster job(3, {"run.target_return=0", "run.total_steps=150000"});
  std::vector<RankProcess> ranks = job.start_all();
  ASSERT_EQ(ranks.size(), 3u) << ranks[0].output();
  ASSERT_NO_FATAL_FAILURE(expect_every_rank_ended(ranks, wait_all(ranks, 80s), "stopped after "));
  expect_identical_replicas(job);
  EXPECT_GE(job.metric(0, "env_steps"), kTotalSteps) << "env_steps counts every rank's";
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(
        leftover_segments(r == 0 ? job.name : job.name + "-rank" + std::to_string(r)).empty())
        << "rank " << r;
  }
}

// run.deterministic on two ranks: every step waits for both ranks' batches,
// so two jobs of one config write the same checkpoints, byte for byte; with
// learner.on_policy (lag 0) and the observation statistics of both ranks'
// batches on each, to the target, which rank 0's evaluation confirms while
// training waits for it. distributed.batch_wait_ms = 2: a rank that went
// ahead without the other's batch would do so often, and differ (it did in
// 3 of 3 tries, the lockstep taken out).
std::map<std::string, std::string> deterministic_checkpoints() {
  Cluster job(
      2, {"run.deterministic=true", "learner.on_policy=true", "model.normalize_observations=true",
          "run.total_steps=20000000", "distributed.batch_wait_ms=2"});
  std::vector<RankProcess> ranks = job.start_all();
  EXPECT_EQ(ranks.size(), 2u) << ranks[0].output();
  if (ranks.size() != 2) return {};
  expect_every_rank_ended(ranks, wait_all(ranks, 80s), "solved: ");
  if (::testing::Test::HasFatalFailure()) return {};
  expect_identical_replicas(job);
  EXPECT_EQ(job.metric(0, "policy_lag_max"), 0);
  return checkpoint_files(job.run());
}

TEST(ClusterTest, TwoDeterministicOnPolicyJobsOfTwoRanksWriteTheSameCheckpoints) {
  const auto a = deterministic_checkpoints();  // one job after the other, in one directory
  const auto b = deterministic_checkpoints();
  ASSERT_TRUE(a.count("best.ckpt")) << "an evaluation confirmed the target";
  expect_same_checkpoints(a, b);
}

// Under run.deterministic rank 1 waits for rank 0's evaluations (and each
// rank for the other's batch), holding a batch while its actors idle: no
// stall, however far actor.stall_timeout_s lies below the wait.
TEST(ClusterTest, DeterministicRanksWaitingForAnEvaluationAreNotStalled) {
  Cluster job(2,
              {"env.name=pendulum", "run.deterministic=true", "learner.on_policy=true",
               "run.target_return=0", "run.total_steps=120000", "run.eval_interval_steps=40000",
               "run.eval_episodes=40000", "actor.stall_timeout_s=1", "distributed.timeout_s=10"});
  std::vector<RankProcess> ranks = job.start_all();
  ASSERT_EQ(ranks.size(), 2u) << ranks[0].output();
  const auto statuses = wait_all(ranks, 100s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(statuses[r], std::optional<int>(0))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
  }
  expect_identical_replicas(job);
  EXPECT_GE(job.metric(0, "eval_env_steps"), 40000) << "an evaluation held training";
  EXPECT_EQ(job.metric(0, "eval_episodes"), 40000);  // about 2 s each
  EXPECT_GT(job.metric(1, "stage_time_learner_wait_s"), 2) << "rank 1 waited for rank 0";
}

// --- A lost peer: exit 75 within the deadline, then --resume ------------

TEST(ClusterTest, SigkilledRankOneEndsRankZeroWith75AndBothResume) {
  Cluster job(2,
              {"run.target_return=0", "run.total_steps=1000000000", "run.checkpoint_interval_s=1"});
  std::vector<RankProcess> ranks = job.start_all();
  ASSERT_EQ(ranks.size(), 2u) << ranks[0].output();
  ASSERT_TRUE(wait_for(
      [&] {
        return job.metric(0, "env_steps") > 50000 && job.metric(1, "env_steps") > 0 &&
               newest_checkpoint(job.run());
      },
      45s))
      << "no progress and checkpoint\n"
      << ranks[0].output() << ranks[1].output();
  const std::vector<pid_t> actors0 = children_of(ranks[0].pid());
  const std::vector<pid_t> actors1 = children_of(ranks[1].pid());
  EXPECT_EQ(actors0.size(), 1u);
  // actor.nice "auto" on a rank of several: its actors yield to its learner
  // (fleet/priority.h); each has committed unrolls, so it has set it.
  const int want = std::max(10, getpriority(PRIO_PROCESS, 0));  // never raised above the test's
  for (pid_t actor : actors0) EXPECT_EQ(getpriority(PRIO_PROCESS, actor), want) << "rank 0's";
  for (pid_t actor : actors1) EXPECT_EQ(getpriority(PRIO_PROCESS, actor), want) << "rank 1's";

  const auto killed = Clock::now();
  ranks[1].signal(SIGKILL);
  ASSERT_EQ(ranks[1].wait(10s), std::optional<int>(128 + SIGKILL));
  const double took = expect_rank0_lost_rank1(ranks[0], killed, "after rank 1's SIGKILL");
  std::cout << "[ cluster  ] rank 0 exited 75 " << took
            << " s after rank 1's SIGKILL: " << ranks[0].last_error_line() << "\n";
  // How each rank ended, for a scheduler's retry loop: rank 0 says it lost
  // rank 1; the SIGKILLed rank 1 wrote nothing.
  const std::string ended0 = slurp(job.run() + "/exit_status");
  EXPECT_EQ(ended0.rfind("75 rank 0: lost rank 1", 0), 0u) << ended0;
  EXPECT_FALSE(std::filesystem::exists(job.run() + "/ranks/1/exit_status"));

  // Rank 0 left nothing; rank 1's actors notice their learner is gone.
  EXPECT_TRUE(all_gone(actors0, 2s)) << "rank 0's actor outlived it";
  EXPECT_TRUE(leftover_segments(job.name).empty()) << joined(leftover_segments(job.name));
  EXPECT_TRUE(all_gone(actors1)) << "rank 1's actor outlived it by 10 s";
  const size_t killed_segments = leftover_segments(job.name + "-rank1").size();
  std::cout << "[ cluster  ] rank 1's SIGKILL left " << killed_segments << " segments\n";

  // The checkpoint rank 0 left is the point both resume from.
  const auto checkpoint = newest_checkpoint(job.run());
  ASSERT_TRUE(checkpoint);
  const double steps_before = job.metric(0, "env_steps");
  const double version_before = job.metric(0, "policy_version");
  const uint64_t total = static_cast<uint64_t>(steps_before) + 200000;
  const std::vector<std::string> resume = {"--resume", job.run(), "--set",
                                           "run.total_steps=" + std::to_string(total)};
  std::filesystem::remove(job.run() + "/rendezvous.address");  // rank 0 writes its new one
  std::vector<RankProcess> again;
  again.push_back(start_rank(
      [&] {
        // Where a rank stands is told again at every start (the run keeps no rank).
        std::vector<std::string> a = {"train"};
        a.insert(a.end(), resume.begin(), resume.end());
        a.insert(a.end(),
                 {"--set", "distributed.rank=0", "--set", "distributed.rendezvous=127.0.0.1:0"});
        return a;
      }(),
      job.files(0, "-resumed")));
  const std::string address = job.rendezvous_address();
  ASSERT_FALSE(address.empty()) << again[0].output();
  {
    std::vector<std::string> a = {"train"};
    a.insert(a.end(), resume.begin(), resume.end());
    a.insert(a.end(),
             {"--set", "distributed.rank=1", "--set", "distributed.rendezvous=" + address});
    again.push_back(start_rank(a, job.files(1, "-resumed")));
  }
  const auto statuses = wait_all(again, 60s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(statuses[r], std::optional<int>(0))
        << "resumed rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << again[r].output();
  }

  for (const std::string& dir : {job.run(), job.run() + "/ranks/1"}) {
    const std::string ended = slurp(dir + "/exit_status");
    EXPECT_EQ(ended.rfind("0 stopped after ", 0), 0u) << dir << ": " << ended;
  }

  const std::optional<ResumedLine> resumed = resumed_line(job.train_log(0));
  ASSERT_TRUE(resumed) << "rank 0 logged no 'resumed from'";
  EXPECT_EQ(resumed->path, checkpoint->first);
  EXPECT_EQ(resumed->env_steps, checkpoint->second);
  EXPECT_GT(resumed->policy_version, 0u);
  // (The last metrics line may be older than the checkpoint: no bound from it.)
  EXPECT_NE(slurp(job.train_log(1))
                .find("starting from rank 0's state (" + std::to_string(resumed->env_steps) +
                      " env steps"),
            std::string::npos)
      << "rank 1 did not start from the resumed state:\n"
      << slurp(job.train_log(1));
  EXPECT_GE(job.metric(0, "env_steps"), static_cast<double>(total));
  const ChecksumLine end = expect_identical_replicas(job);
  EXPECT_GT(end.policy_version, resumed->policy_version) << "the policy version continues";
  EXPECT_GT(end.policy_version, version_before);

  // The stale sweep of the resumed learners removed what the SIGKILL left.
  EXPECT_TRUE(leftover_segments(job.name + "-rank1").empty())
      << joined(leftover_segments(job.name + "-rank1"));
  EXPECT_TRUE(leftover_segments(job.name).empty());
}

// --- Placement from a launcher's environment ----------------------------

TEST(ClusterTest, RanksPlacedByTorchrunVariablesTrain) {
  // A fixed port, as a launcher gives it: free a moment ago.
  const int port = free_port();
  ASSERT_GT(port, 0);
  Cluster job(2, {"run.target_return=0", "run.total_steps=100000"});
  // No distributed.world_size, rank or rendezvous on the command line.
  job.sets.erase(std::remove(job.sets.begin(), job.sets.end(), "distributed.world_size=2"),
                 job.sets.end());
  std::vector<RankProcess> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(start_rank(job.args({}), job.files(r),
                               {{"RANK", std::to_string(r)},
                                {"WORLD_SIZE", "2"},
                                {"MASTER_ADDR", "127.0.0.1"},
                                {"MASTER_PORT", std::to_string(port)}}));
  }
  const auto statuses = wait_all(ranks, 60s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(statuses[r], std::optional<int>(0))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
    // stderr: a rank > 0 opens its train.log only after it joined.
    EXPECT_NE(ranks[r].stderr_text().find("torchrun"), std::string::npos)
        << "rank " << r << " does not say where its placement came from:\n"
        << ranks[r].output();
  }
  expect_identical_replicas(job);
  EXPECT_GE(job.metric(0, "env_steps"), 100000);
}

// Rank 0's status shows every rank; `scale --rank` and `--node` reach one
// rank's actors through rank 0; an unknown rank is named with the ones there are.
TEST(ClusterTest, RankZeroShowsEveryRankAndScalesOneNode) {
  Cluster job(2, {"run.target_return=0", "run.total_steps=1000000000"});
  std::vector<RankProcess> ranks;
  ranks.push_back(job.start(0, "127.0.0.1:0", {"--name", "node-a"}));
  const std::string address = job.rendezvous_address();
  ASSERT_FALSE(address.empty()) << ranks[0].output();
  ranks.push_back(job.start(1, address, {"--name", "node-x"}));
  const std::string cli = std::string(PRONGHORN_BIN) + " ";
  const std::string at = " --run-dir " + job.run();
  std::string table;
  ASSERT_TRUE(wait_for(
      [&] {
        table = shell(cli + "status" + at).second;
        // Rank 1's row, with the control address scale needs.
        return std::regex_search(table, std::regex("\n +1 +node-x .*127\\.0\\.0\\.1:[0-9]+"));
      },
      30s))
      << table;
  EXPECT_NE(table.find("rank 0 of 2"), std::string::npos) << table;
  EXPECT_NE(table.find("node-x"), std::string::npos) << table;

  auto [code, out] = shell(cli + "scale --rank 1 --actors 2" + at);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("actors: 1 → 2"), std::string::npos) << out;
  std::tie(code, out) = shell(cli + "scale --node node-x --actors 0" + at);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("→ 0"), std::string::npos) << out;
  // Rank 1's own status says what its node now wants; rank 0's kept its one.
  const std::string rank1 =
      " --run-dir " + job.rank_dir(1) + " --token-file " + job.run() + "/token";
  EXPECT_TRUE(wait_for(
      [&] {
        return shell(cli + "status --json" + rank1).second.find("\"actors_desired\": 0") !=
               std::string::npos;
      },
      10s))
      << shell(cli + "status --json" + rank1).second;
  EXPECT_NE(shell(cli + "status --json" + at).second.find("\"actors_desired\": 1"),
            std::string::npos);
  std::tie(code, out) = shell(cli + "scale --rank 7 --actors 1" + at);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("no rank 7 in this job; its ranks: 0 ("), std::string::npos) << out;

  // `stop --now` asked of rank 1 stops every rank, and rank 0 writes no
  // checkpoint (none was due: run.checkpoint_interval_s is 60 s).
  EXPECT_EQ(shell(cli + "stop --now" + rank1).first, 0);
  const auto statuses = wait_all(ranks, 30s);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(statuses[r], std::optional<int>(0)) << ranks[r].output();
  EXPECT_FALSE(newest_checkpoint(job.run())) << "stop --now on rank 1, yet rank 0 checkpointed";
  expect_identical_replicas(job);
}

}  // namespace
