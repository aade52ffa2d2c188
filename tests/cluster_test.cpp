// Several learners training one model, as real `pronghorn train` processes
// (issue 16): ranks on loopback sharing one run directory, or in two network
// namespaces with their own. They train together to identical parameters; a
// killed, stopped or partitioned peer ends the others with exit 75 within
// distributed.timeout_s and a few seconds, leaving no actor or shared memory,
// and the group resumes; a config mismatch, a wrong token, NCCL without a GPU
// and a missing address or run name are exit 2 at start; placement may come
// from torchrun's environment.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/testing/cluster_job.h"
#include "tests/testing/job.h"
#include "tests/testing/netns.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutS = 3;  // distributed.timeout_s of every test

// A prefix for this test's run names and files.
std::string test_tag() {
  return "ct" + std::to_string(getpid()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string status_text(const std::optional<int>& status) {
  return status ? std::to_string(*status) : std::string("still running");
}

// One job of `world` ranks on this machine sharing run directory
// `<parent>/<name>`: rank 0 owns it, rank r writes `ranks/<r>/`.
struct Cluster {
  std::string name;
  std::string parent;  // run.dir
  int world = 2;
  std::vector<std::string> sets;  // "key=value" for every rank

  Cluster(int world_size, std::vector<std::string> extra_sets = {})
      : name(test_tag()), parent(::testing::TempDir() + "/" + name), world(world_size) {
    std::filesystem::remove_all(parent);
    std::filesystem::create_directories(parent);
    sets = {"run.name=" + name,
            "run.dir=" + parent,
            "distributed.world_size=" + std::to_string(world),
            "distributed.timeout_s=" + std::to_string(kTimeoutS),
            "distributed.rendezvous_timeout_s=30",
            "actor.count=1",
            "run.report_interval_s=0.2"};
    sets.insert(sets.end(), extra_sets.begin(), extra_sets.end());
  }
  ~Cluster() { std::filesystem::remove_all(parent); }

  std::string run() const { return parent + "/" + name; }
  std::string rank_dir(int rank) const {
    return rank == 0 ? run() : run() + "/ranks/" + std::to_string(rank);
  }
  std::string train_log(int rank) const { return rank_dir(rank) + "/train.log"; }
  // Where a rank's stdout and stderr go: beside the run, not in it.
  std::string files(int rank, const std::string& what = "") const {
    return parent + "/rank" + std::to_string(rank) + what;
  }

  // `train` with every --set, then `more` (later --set win).
  std::vector<std::string> args(const std::vector<std::string>& more) const {
    std::vector<std::string> all = {"train"};
    for (const std::string& s : sets) all.insert(all.end(), {"--set", s});
    all.insert(all.end(), more.begin(), more.end());
    return all;
  }

  RankProcess start(int rank, const std::string& rendezvous,
                    const std::vector<std::string>& more = {},
                    const std::map<std::string, std::string>& env = {},
                    const std::string& what = "") const {
    std::vector<std::string> placed = {"--set", "distributed.rank=" + std::to_string(rank), "--set",
                                       "distributed.rendezvous=" + rendezvous};
    placed.insert(placed.end(), more.begin(), more.end());
    return start_rank(args(placed), files(rank, what), env);
  }

  // Rank 0's store address once it listens ("127.0.0.1:PORT"), "" after 30 s.
  std::string rendezvous_address() const {
    return wait_for_line_file(run() + "/rendezvous.address", 30s);
  }

  // Starts rank 0 on a free port and the others once it listens.
  std::vector<RankProcess> start_all(const std::vector<std::string>& more = {}) const {
    std::vector<RankProcess> ranks;
    ranks.push_back(start(0, "127.0.0.1:0", more));
    const std::string address = rendezvous_address();
    if (address.empty()) return ranks;  // the caller's ASSERT on the size says so
    for (int r = 1; r < world; ++r) ranks.push_back(start(r, address, more));
    return ranks;
  }

  double metric(int rank, const std::string& key) const { return last_metric(rank_dir(rank), key); }
};

// Every rank's exit status, waiting for all within `timeout` from now.
std::vector<std::optional<int>> wait_all(std::vector<RankProcess>& ranks,
                                         std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::optional<int>> statuses;
  for (RankProcess& rank : ranks) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    statuses.push_back(rank.wait(std::max(left, 1ms)));
  }
  return statuses;
}

// Whether every process in `pids` is gone within `timeout`.
bool all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds timeout = 10s) {
  return wait_for(
      [&] {
        return std::all_of(pids.begin(), pids.end(), [](pid_t p) { return process_gone(p); });
      },
      timeout);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += n + " ";
  return out;
}

// The newest checkpoint file of `run` and the env steps its name carries
// (checkpoints/env-steps-<20 digits>.ckpt); nothing when there is none.
std::optional<std::pair<std::string, uint64_t>> newest_checkpoint(const std::string& run) {
  static const std::regex kName(R"(env-steps-(\d{20})\.ckpt)");
  std::optional<std::pair<std::string, uint64_t>> newest;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run + "/checkpoints", ec)) {
    const std::string file = e.path().filename();
    std::smatch m;
    if (!std::regex_match(file, m, kName)) continue;
    const uint64_t steps = std::stoull(m[1]);
    if (!newest || steps > newest->second) newest = {e.path(), steps};
  }
  return newest;
}

// The checksum lines of every rank agree: same parameters, learner steps and
// policy version. Returns rank 0's.
ChecksumLine expect_identical_replicas(const Cluster& job) {
  const std::optional<ChecksumLine> zero = checksum_line(job.train_log(0));
  EXPECT_TRUE(zero) << job.train_log(0) << " has no checksum line:\n" << slurp(job.train_log(0));
  if (!zero) return {};
  EXPECT_EQ(zero->rank, 0);
  EXPECT_GT(zero->learner_steps, 0u);
  for (int r = 1; r < job.world; ++r) {
    const std::optional<ChecksumLine> other = checksum_line(job.train_log(r));
    EXPECT_TRUE(other) << job.train_log(r) << " has no checksum line";
    if (!other) continue;
    EXPECT_EQ(other->rank, r);
    EXPECT_EQ(other->checksum, zero->checksum)
        << "rank " << r << "'s parameters differ from rank 0's";
    EXPECT_EQ(other->learner_steps, zero->learner_steps) << "rank " << r;
    EXPECT_EQ(other->policy_version, zero->policy_version) << "rank " << r;
    // No replica drifted and was repaired on the way (learner/data_parallel.cpp).
    EXPECT_EQ(slurp(job.train_log(r)).find("differ from rank 0's"), std::string::npos)
        << "rank " << r << " drifted:\n"
        << slurp(job.train_log(r));
  }
  return *zero;
}

// --- Training together ---------------------------------------------------

// Rank 0 exits 75 within the deadline (+ naming the lost rank) after `fault`
// at `since`, its last line naming rank 1; returns the seconds it took.
double expect_rank0_lost_rank1(RankProcess& rank0, Clock::time_point since, const char* fault) {
  const std::optional<int> status = rank0.wait(std::chrono::seconds(kTimeoutS + 8));
  const double took = seconds_since(since);
  EXPECT_EQ(status, std::optional<int>(75)) << "rank 0 " << fault << " (" << took << " s)\n"
                                            << rank0.output();
  EXPECT_LE(took, kTimeoutS + 8);
  EXPECT_EQ(rank0.last_error_line().rfind("pronghorn: rank 0: lost rank 1", 0), 0u)
      << RankProcess::tail(rank0.stderr_text(), 2000);
  return took;
}

TEST(ClusterTest, TwoRanksTrainCartPoleToTheTargetWithIdenticalParameters) {
  Cluster job(2);  // the default job: CartPole to a mean return of 475
  const auto start = Clock::now();
  std::vector<RankProcess> ranks = job.start_all();
  ASSERT_EQ(ranks.size(), 2u) << "rank 0 wrote no rendezvous.address\n" << ranks[0].output();
  const auto statuses = wait_all(ranks, 80s);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(statuses[r], std::optional<int>(0))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
    EXPECT_EQ(ranks[r].stdout_text().rfind("solved: ", 0), 0u) << ranks[r].stdout_text();
  }
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
  const auto statuses = wait_all(ranks, 80s);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(statuses[r], std::optional<int>(0))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
    EXPECT_EQ(ranks[r].stdout_text().rfind("stopped after ", 0), 0u) << ranks[r].stdout_text();
  }
  expect_identical_replicas(job);
  EXPECT_GE(job.metric(0, "env_steps"), kTotalSteps) << "env_steps counts every rank's";
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(
        leftover_segments(r == 0 ? job.name : job.name + "-rank" + std::to_string(r)).empty())
        << "rank " << r;
  }
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

  const auto killed = Clock::now();
  ranks[1].signal(SIGKILL);
  ASSERT_EQ(ranks[1].wait(10s), std::optional<int>(128 + SIGKILL));
  const double took = expect_rank0_lost_rank1(ranks[0], killed, "after rank 1's SIGKILL");
  std::cout << "[ cluster  ] rank 0 exited 75 " << took
            << " s after rank 1's SIGKILL: " << ranks[0].last_error_line() << "\n";

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
        return table.find("total") != std::string::npos &&
               table.find("127.0.0.1:") != std::string::npos;
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

  EXPECT_EQ(shell(cli + "stop" + at).first, 0);
  const auto statuses = wait_all(ranks, 30s);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(statuses[r], std::optional<int>(0)) << ranks[r].output();
  expect_identical_replicas(job);
}

}  // namespace
