// Faults and refusals of a job of several `pronghorn train` processes
// (issue 16): a stopped peer, or ranks in two network namespaces whose link
// goes silent, end the others with exit 75 within distributed.timeout_s and a
// few seconds, leaving no actor or shared memory; a rank that never comes ends
// the others with 75 at the rendezvous deadline; a config mismatch, a wrong
// token, NCCL without a GPU and a missing address or run name are exit 2 at
// start. Training together, a killed peer with --resume, status and placement
// are in cluster_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/testing/cluster.h"
#include "tests/testing/cluster_job.h"
#include "tests/testing/job.h"
#include "tests/testing/netns.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
using Clock = std::chrono::steady_clock;

// --- A stopped or partitioned peer: exit 75 within the deadline ----------

TEST(ClusterTest, StoppedRankOneIsATimeoutNotAHang) {
  Cluster job(2, {"run.target_return=0", "run.total_steps=1000000000"});
  std::vector<RankProcess> ranks = job.start_all();
  ASSERT_EQ(ranks.size(), 2u) << ranks[0].output();
  ASSERT_TRUE(wait_for(
      [&] { return job.metric(0, "env_steps") > 0 && job.metric(1, "env_steps") > 0; }, 45s))
      << ranks[0].output() << ranks[1].output();
  const std::vector<pid_t> actors0 = children_of(ranks[0].pid());
  const std::vector<pid_t> actors1 = children_of(ranks[1].pid());

  const auto stopped = Clock::now();
  ranks[1].signal(SIGSTOP);
  const double took = expect_rank0_lost_rank1(ranks[0], stopped, "with rank 1 stopped");
  std::cout << "[ cluster  ] rank 0 exited 75 " << took
            << " s after rank 1's SIGSTOP: " << ranks[0].last_error_line() << "\n";
  EXPECT_TRUE(all_gone(actors0, 2s)) << "rank 0's actor outlived it";
  EXPECT_TRUE(leftover_segments(job.name).empty()) << joined(leftover_segments(job.name));

  // Woken, rank 1 finds rank 0 gone and ends the same way.
  const auto woken = Clock::now();
  ranks[1].signal(SIGCONT);
  const std::optional<int> status1 = ranks[1].wait(std::chrono::seconds(kTimeoutS + 10));
  ASSERT_EQ(status1, std::optional<int>(75))
      << "rank 1 after SIGCONT (" << seconds_since(woken) << " s)\n"
      << ranks[1].output();
  std::cout << "[ cluster  ] rank 1 exited 75 " << seconds_since(woken)
            << " s after SIGCONT: " << ranks[1].last_error_line() << "\n";
  EXPECT_NE(ranks[1].last_error_line().find("rank 0"), std::string::npos)
      << RankProcess::tail(ranks[1].stderr_text(), 2000);
  EXPECT_TRUE(all_gone(actors1, 5s)) << "rank 1's actor outlived it";
  EXPECT_TRUE(leftover_segments(job.name + "-rank1").empty())
      << joined(leftover_segments(job.name + "-rank1"));
}

// Two "machines": each rank in its own namespace with its own run directory,
// the token passed in the environment. A silent link ends both.
TEST(ClusterTest, PartitionedRanksInTwoNamespacesBothExit75) {
  if (auto why = NetnsPair::unavailable()) GTEST_SKIP() << *why;
  NetnsPair net;
  const std::string name = test_tag();
  const std::string base = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(base);
  const std::string dir_a = base + "/a", dir_b = base + "/b";
  std::filesystem::create_directories(dir_a);
  std::filesystem::create_directories(dir_b);
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() { std::filesystem::remove_all(path); }
  } remove_base{base};

  const auto rank_argv = [&](int rank, const std::string& dir, const std::string& rendezvous,
                             const std::string& token) {
    std::vector<std::string> argv = {"env"};
    for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "JOB_COMPLETION_INDEX", "SLURM_PROCID", "PRONGHORN_TOKEN"}) {
      argv.insert(argv.end(), {"-u", v});
    }
    if (!token.empty()) argv.push_back("PRONGHORN_TOKEN=" + token);
    argv.insert(argv.end(), {PRONGHORN_BIN, "--log-level", "info", "train"});
    for (const std::string& s :
         {"run.name=" + name, "run.dir=" + dir, std::string("distributed.world_size=2"),
          "distributed.rank=" + std::to_string(rank), "distributed.rendezvous=" + rendezvous,
          "distributed.timeout_s=" + std::to_string(kTimeoutS),
          std::string("distributed.rendezvous_timeout_s=30"), std::string("actor.count=1"),
          std::string("run.target_return=0"), std::string("run.total_steps=1000000000"),
          std::string("run.report_interval_s=0.2")}) {
      argv.insert(argv.end(), {"--set", s});
    }
    return argv;
  };
  const std::string out_a = base + "/rank0.log", out_b = base + "/rank1.log";
  const pid_t pid0 =
      net.spawn_in(NetnsPair::Side::a, rank_argv(0, dir_a, net.address_a() + ":0", ""), out_a);
  const std::string address = wait_for_line_file(dir_a + "/" + name + "/rendezvous.address", 30s);
  ASSERT_FALSE(address.empty()) << slurp(out_a);
  EXPECT_EQ(address.rfind(net.address_a() + ":", 0), 0u) << address;
  const std::string token = wait_for_line_file(dir_a + "/" + name + "/token", 5s);
  ASSERT_FALSE(token.empty());
  const pid_t pid1 = net.spawn_in(NetnsPair::Side::b, rank_argv(1, dir_b, address, token), out_b);
  const std::string run_a = dir_a + "/" + name, run_b = dir_b + "/" + name + "/ranks/1";
  ASSERT_TRUE(wait_for(
      [&] { return last_metric(run_a, "env_steps") > 0 && last_metric(run_b, "env_steps") > 0; },
      45s))
      << "rank 0:\n"
      << slurp(out_a) << "\nrank 1:\n"
      << slurp(out_b);
  EXPECT_FALSE(std::filesystem::exists(dir_b + "/" + name + "/token"))
      << "rank 1 wrote a token of its own";
  // Gloo bound the address that routes to rank 0, not the hostname's.
  EXPECT_NE(slurp(out_a).find("collective: Gloo on " + net.address_a() + "\n"), std::string::npos)
      << slurp(out_a);
  EXPECT_NE(slurp(out_b).find("collective: Gloo on " + net.address_b() + "\n"), std::string::npos)
      << slurp(out_b);

  std::vector<pid_t> actors = children_of(pid0);
  for (pid_t a : children_of(pid1)) actors.push_back(a);
  EXPECT_EQ(actors.size(), 2u);
  const auto cut = Clock::now();
  net.cut();
  const auto deadline = std::chrono::seconds(kTimeoutS + 10);
  const std::optional<int> status0 = wait_exit_within(pid0, deadline);
  const double took0 = seconds_since(cut);
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - (Clock::now() - cut));
  const std::optional<int> status1 = wait_exit_within(pid1, std::max(left, 1ms));
  const double took1 = seconds_since(cut);
  const std::string text0 = slurp(out_a), text1 = slurp(out_b);
  EXPECT_EQ(status0, std::optional<int>(75)) << "rank 0 after the cut (" << took0 << " s)\n"
                                             << RankProcess::tail(text0, 3000);
  EXPECT_EQ(status1, std::optional<int>(75)) << "rank 1 after the cut (" << took1 << " s)\n"
                                             << RankProcess::tail(text1, 3000);
  std::cout << "[ cluster  ] after the cut: rank 0 exited " << status_text(status0) << " in "
            << took0 << " s, rank 1 " << status_text(status1) << " in " << took1 << " s\n";
  // Each names its peer: rank 0 the lost rank, rank 1 rank 0 or its store.
  std::cout << "[ cluster  ] rank 0: " << last_line(text0)
            << "\n[ cluster  ] rank 1: " << last_line(text1) << "\n";
  EXPECT_EQ(last_line(text0).rfind("pronghorn: rank 0: lost rank 1", 0), 0u)
      << RankProcess::tail(text0, 2000);
  EXPECT_EQ(last_line(text1).rfind("pronghorn: rank 1: ", 0), 0u) << RankProcess::tail(text1, 2000);
  EXPECT_NE(last_line(text1).find("rank 0"), std::string::npos) << RankProcess::tail(text1, 2000);
  EXPECT_TRUE(all_gone(actors, 2s)) << "an actor outlived its rank";
  EXPECT_TRUE(leftover_segments(name).empty()) << joined(leftover_segments(name));
  EXPECT_TRUE(leftover_segments(name + "-rank1").empty())
      << joined(leftover_segments(name + "-rank1"));
}

// --- A rank that never comes: exit 75 at the rendezvous deadline ---------

// Under Slurm, a node that failed to start: rank 0 waits
// distributed.rendezvous_timeout_s, then ends with one line naming the rank
// and leaves its exit_status (the retry loop reads 75 there) in a directory
// that is otherwise empty and that the same command takes again.
TEST(ClusterTest, ARankThatNeverComesEndsRankZeroWith75NamingItAndItsExitStatus) {
  Cluster job(2, {"distributed.rendezvous_timeout_s=2"});
  for (const char* attempt : {"", "-again"}) {
    const auto start = Clock::now();
    RankProcess rank0 = job.start(0, "127.0.0.1:0", {}, {}, attempt);
    const std::optional<int> status = rank0.wait(20s);
    ASSERT_EQ(status, std::optional<int>(75))
        << "attempt" << attempt << ": exit " << status_text(status) << " after "
        << seconds_since(start) << " s\n"
        << rank0.output();
    EXPECT_EQ(rank0.last_error_line().rfind("pronghorn: ", 0), 0u) << rank0.output();
    EXPECT_NE(rank0.last_error_line().find("rank 1 did not join within 2 s"), std::string::npos)
        << rank0.output();
    const std::string ended = slurp(job.run() + "/exit_status");
    EXPECT_EQ(ended.rfind("75 ", 0), 0u) << ended;
    EXPECT_NE(ended.find("rank 1 did not join"), std::string::npos) << ended;
    for (const auto& e : std::filesystem::directory_iterator(job.run())) {
      const std::string name = e.path().filename();
      EXPECT_TRUE(name == "exit_status" || name == "lock") << "left behind: " << name;
    }
  }
}

// Rank 1 whose rank 0 never listens ends the same way, naming rank 0.
TEST(ClusterTest, ARankZeroThatNeverComesEndsRankOneWith75NamingIt) {
  Cluster job(2, {"distributed.rendezvous_timeout_s=2"});
  const auto start = Clock::now();
  RankProcess rank1 = job.start(1, "127.0.0.1:" + std::to_string(free_port()));
  const std::optional<int> status = rank1.wait(20s);
  ASSERT_EQ(status, std::optional<int>(75))
      << "exit " << status_text(status) << " after " << seconds_since(start) << " s\n"
      << rank1.output();
  EXPECT_EQ(rank1.last_error_line().rfind("pronghorn: rank 1: rank 0", 0), 0u) << rank1.output();
  EXPECT_NE(rank1.last_error_line().find("within 2 s"), std::string::npos) << rank1.output();
  EXPECT_FALSE(std::filesystem::exists(job.rank_dir(1))) << "rank 1 made a run directory";
}

// --- Refusals at start: exit 2 ------------------------------------------

TEST(ClusterTest, ConfigMismatchStopsBothRanksWith2NamingTheKey) {
  Cluster job(2, {"run.target_return=0", "run.total_steps=100000"});
  const auto start = Clock::now();
  std::vector<RankProcess> ranks;
  ranks.push_back(job.start(0, "127.0.0.1:0"));
  const std::string address = job.rendezvous_address();
  ASSERT_FALSE(address.empty()) << ranks[0].output();
  ranks.push_back(job.start(1, address, {"--set", "model.hidden=[32]"}));
  const auto statuses = wait_all(ranks, 15s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r], std::optional<int>(2))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
    EXPECT_NE(ranks[r].stderr_text().find("model.hidden differs"), std::string::npos)
        << "rank " << r << ":\n"
        << ranks[r].output();
  }
  std::cout << "[ cluster  ] mismatch refused in " << seconds_since(start) << " s\n";
  EXPECT_FALSE(std::filesystem::exists(job.rank_dir(1))) << "rank 1 kept a run directory";
}

// A rank that fails on its own (exit 2 here: restarted without --resume
// beside an earlier run's ranks/1) ends the others with its reason and code,
// not a lost peer's 75, which a scheduler would retry forever.
TEST(ClusterTest, ARankThatFailsOnItsOwnEndsTheOthersWithItsReasonNotWith75) {
  Cluster job(2, {"run.target_return=0", "run.total_steps=50000"});
  {
    std::vector<RankProcess> first = job.start_all();
    ASSERT_EQ(first.size(), 2u) << first[0].output();
    const auto statuses = wait_all(first, 60s);
    for (int r = 0; r < 2; ++r) ASSERT_EQ(statuses[r], std::optional<int>(0)) << first[r].output();
  }
  std::filesystem::remove(job.run() + "/rendezvous.address");
  std::vector<RankProcess> ranks;
  ranks.push_back(job.start(0, "127.0.0.1:0", {"--resume", job.run()}, {}, "-again"));
  const std::string address = job.rendezvous_address();
  ASSERT_FALSE(address.empty()) << ranks[0].output();
  const auto start = Clock::now();
  ranks.push_back(job.start(1, address, {}, {}, "-again"));
  const auto statuses = wait_all(ranks, 20s);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r], std::optional<int>(2))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
  }
  EXPECT_EQ(ranks[0].last_error_line().rfind("pronghorn: rank 1 failed: ", 0), 0u)
      << ranks[0].output();
  EXPECT_NE(ranks[0].last_error_line().find("continue the whole group with --resume"),
            std::string::npos)
      << ranks[0].output();
  const std::string ended0 = slurp(job.run() + "/exit_status");  // the first run's "0 …" replaced
  EXPECT_EQ(ended0.rfind("2 rank 1 failed: ", 0), 0u) << ended0;
  std::cout << "[ cluster  ] rank 0 ended with rank 1's reason " << seconds_since(start)
            << " s after rank 1 started\n";
  EXPECT_TRUE(leftover_segments(job.name).empty()) << joined(leftover_segments(job.name));
}

TEST(ClusterTest, WrongTokenStopsBothRanksWith2NamingTheToken) {
  Cluster job(2, {"run.target_return=0", "run.total_steps=100000"});
  const std::string elsewhere = job.parent + "/elsewhere";  // rank 1's own "machine"
  std::vector<RankProcess> ranks;
  ranks.push_back(job.start(0, "127.0.0.1:0"));
  const std::string address = job.rendezvous_address();
  ASSERT_FALSE(address.empty()) << ranks[0].output();
  ranks.push_back(
      job.start(1, address, {"--set", "run.dir=" + elsewhere}, {{"PRONGHORN_TOKEN", "wrong"}}));
  const auto statuses = wait_all(ranks, 15s);
  // Rank 0 refuses and publishes its verdict; rank 1 must read it, not find
  // the store gone and take it for a lost peer (exit 75, "did not arrive").
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r], std::optional<int>(2))
        << "rank " << r << " with a wrong token on rank 1 should exit 2 naming the token; exit "
        << status_text(statuses[r]) << ", last line: " << ranks[r].last_error_line() << "\n"
        << ranks[r].output();
  }
  EXPECT_NE(ranks[0].stderr_text().find("rank 1: its token differs from rank 0's"),
            std::string::npos)
      << ranks[0].output();
  EXPECT_NE(ranks[1].last_error_line().find("token"), std::string::npos) << ranks[1].output();
  EXPECT_FALSE(std::filesystem::exists(elsewhere + "/" + job.name + "/ranks/1"))
      << "a refused rank kept a run directory";
}

// A rank whose own config cannot work (NCCL, no GPU) says so at start, in one
// line, not after distributed.rendezvous_timeout_s spent waiting for the
// others; and keeps no run directory.
TEST(ClusterTest, NcclWithoutAGpuIsOneLineAndExit2BeforeTheRendezvous) {
  Cluster job(2, {"distributed.backend=nccl", "run.target_return=0", "run.total_steps=100000",
                  "distributed.rendezvous_timeout_s=20"});
  const auto start = Clock::now();
  // Rank 1 points at a port nobody listens on: it must not get that far.
  std::vector<RankProcess> ranks;
  ranks.push_back(job.start(0, "127.0.0.1:0"));
  ranks.push_back(job.start(1, "127.0.0.1:1"));
  for (int r = 0; r < 2; ++r) {
    const std::optional<int> status = ranks[r].wait(10s);
    EXPECT_EQ(status, std::optional<int>(2))
        << "rank " << r << " with backend nccl and no GPU should refuse at start; exit "
        << status_text(status) << " after " << seconds_since(start) << " s\n"
        << ranks[r].output();
    const std::string err = ranks[r].stderr_text();
    std::smatch m;
    EXPECT_TRUE(std::regex_search(err, m, std::regex("pronghorn: [^\n]*nccl[^\n]*CUDA[^\n]*")))
        << "rank " << r << ":\n"
        << err;
  }
  EXPECT_FALSE(std::filesystem::exists(job.run())) << "a job that never ran kept its directory";
}

TEST(ClusterTest, WorldSizeTwoWithoutARendezvousIsExit2NamingWhereToSetIt) {
  Cluster job(2);
  RankProcess rank = start_rank(job.args({"--set", "distributed.rank=0"}), job.files(0));
  const std::optional<int> status = rank.wait(20s);
  EXPECT_EQ(status, std::optional<int>(2)) << rank.output();
  const std::string err = rank.stderr_text();
  EXPECT_NE(err.find("distributed.rendezvous"), std::string::npos) << err;
  EXPECT_NE(err.find("MASTER_ADDR"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(job.run()));
}

TEST(ClusterTest, WorldSizeTwoWithoutARunNameIsExit2) {
  Cluster job(2);
  std::vector<std::string> args = {"train",
                                   "--set",
                                   "run.dir=" + job.parent,
                                   "--set",
                                   "distributed.world_size=2",
                                   "--set",
                                   "distributed.rank=0",
                                   "--set",
                                   "distributed.rendezvous=127.0.0.1:0"};
  RankProcess rank = start_rank(args, job.files(0));
  const std::optional<int> status = rank.wait(20s);
  EXPECT_EQ(status, std::optional<int>(2)) << rank.output();
  EXPECT_NE(rank.stderr_text().find("run.name"), std::string::npos) << rank.output();
  for (const auto& e : std::filesystem::directory_iterator(job.parent)) {
    EXPECT_EQ(e.path().filename().string().rfind("rank0.", 0), 0u)
        << "a run directory was made: " << e.path();
  }
}

}  // namespace
