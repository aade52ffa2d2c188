// One job of several `pronghorn train` ranks on this machine (loopback),
// sharing one run directory: how each rank is started and where it writes,
// and the checks every cluster test makes of what the ranks leave.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/testing/cluster_job.h"
#include "tests/testing/job.h"

namespace pronghorn::testing {

inline constexpr int kTimeoutS = 3;  // distributed.timeout_s of every cluster test

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
    return wait_for_line_file(run() + "/rendezvous.address", std::chrono::seconds(30));
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

// Every rank exited 0 (a fatal failure otherwise: wrap the call in
// ASSERT_NO_FATAL_FAILURE) and its stdout starts with `first_words`.
inline void expect_every_rank_ended(std::vector<RankProcess>& ranks,
                                    const std::vector<std::optional<int>>& statuses,
                                    const std::string& first_words) {
  for (size_t r = 0; r < ranks.size(); ++r) {
    ASSERT_EQ(statuses[r], std::optional<int>(0))
        << "rank " << r << " exit " << status_text(statuses[r]) << "\n"
        << ranks[r].output();
    EXPECT_EQ(ranks[r].stdout_text().rfind(first_words, 0), 0u) << ranks[r].stdout_text();
  }
}

// The checksum lines of every rank agree: same parameters, learner steps and
// policy version. Returns rank 0's.
inline ChecksumLine expect_identical_replicas(const Cluster& job) {
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

// Rank 0 exits 75 within the deadline (+ naming the lost rank) after `fault`
// at `since`, its last line naming rank 1; returns the seconds it took.
inline double expect_rank0_lost_rank1(RankProcess& rank0,
                                      std::chrono::steady_clock::time_point since,
                                      const char* fault) {
  const std::optional<int> status = rank0.wait(std::chrono::seconds(kTimeoutS + 8));
  const double took = seconds_since(since);
  EXPECT_EQ(status, std::optional<int>(75)) << "rank 0 " << fault << " (" << took << " s)\n"
                                            << rank0.output();
  EXPECT_LE(took, kTimeoutS + 8);
  EXPECT_EQ(rank0.last_error_line().rfind("pronghorn: rank 0: lost rank 1", 0), 0u)
      << RankProcess::tail(rank0.stderr_text(), 2000);
  return took;
}

}  // namespace pronghorn::testing
