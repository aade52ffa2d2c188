// deploy/slurm/ on a real Slurm cluster of two nodes on this machine
// (tests/testing/slurm_cluster.h): train.sbatch trains CartPole across two
// ranks to the target while `pronghorn status` shows both nodes and `scale
// --node` changes one; a rank's learner killed with SIGKILL is resumed by the
// script's retry loop, an actors.sbatch node follows the group to its new
// address and the job completes, although both jobs' sruns see
// SLURM_EXPORT_ENV=NONE; a job Slurm requeues resumes its run; a refused
// config fails once with exit 2 (no retry); scancel leaves no process and no
// shared memory. Skipped,
// saying why, where no cluster can run (not root, no Slurm).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/testing/job.h"
#include "tests/testing/slurm_cluster.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
namespace fs = std::filesystem;

const std::string kPronghorn = PRONGHORN_BIN;
const std::string kTrainScript = std::string(DEPLOY_DIR) + "/slurm/train.sbatch";
const std::string kActorsScript = std::string(DEPLOY_DIR) + "/slurm/actors.sbatch";

// What a killed earlier run of this test left in TempDir (its run folders,
// "slurm-<pid>-<test>-runs", of a pid no longer alive).
void remove_runs_of_dead_tests() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(::testing::TempDir(), ec)) {
    const std::string name = entry.path().filename();
    if (name.rfind("slurm-", 0) != 0 || name.size() < 5 ||
        name.substr(name.size() - 5) != "-runs") {
      continue;
    }
    const std::string pid = name.substr(6, name.find('-', 6) - 6);
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoi(pid) != getpid() && kill(std::stoi(pid), 0) != 0)
      fs::remove_all(entry.path(), ec);
  }
}

// One job's names and files: unique per process and test, removed at the end.
struct SlurmRun {
  std::string name = "slurm-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string runs = ::testing::TempDir() + "/" + name + "-runs";
  std::string job = runs + "/" + name;

  SlurmRun() {
    remove_runs_of_dead_tests();
    fs::create_directories(runs);
  }
  ~SlurmRun() { fs::remove_all(runs); }

  // train.sbatch's variables; `sets` become EXTRA_SETS.
  std::string train_env(const std::string& sets, int max_restarts = 0) const {
    return "RUN_DIR=" + runs + " RUN_NAME=" + name + " PRONGHORN=" + kPronghorn +
           " ACTORS_PER_NODE=1 MAX_RESTARTS=" + std::to_string(max_restarts) +
           " EXTRA_SETS='server.metrics_port=-1 " + sets + "'";
  }
  std::string actors_env() const {
    return "RUN_DIR=" + runs + " RUN_NAME=" + name + " PRONGHORN=" + kPronghorn +
           " PROCESSES_PER_NODE=1 GIVE_UP_AFTER=60";
  }
  // sbatch options: `cpus` CPUs a task (the nodes have 4), the log in runs/.
  std::string options(const std::string& what, int cpus = 1) const {
    return "--cpus-per-task=" + std::to_string(cpus) + " --time=10 --output=" + runs + "/" + what +
           "-%j.out";
  }
  std::string log(const std::string& what, const std::string& id) const {
    return slurp(runs + "/" + what + "-" + id + ".out");
  }
  std::string status() const {
    return shell(kPronghorn + " status --json --timeout 2 --run-dir " + job).second;
  }
  // The run's shared memory, of its ranks and of actor-only nodes `nodes`.
  std::vector<std::string> segments(const std::vector<std::string>& nodes = {}) const {
    std::vector<std::string> found = leftover_segments(name);
    std::vector<std::string> owners = {name + "-rank1"};
    for (const std::string& n : nodes) owners.push_back("node-" + n);
    for (const std::string& owner : owners) {
      for (const std::string& s : leftover_segments(owner)) found.push_back(s);
    }
    return found;
  }
};

// The flat JSON object in `json` that holds `"key": "value"`, or "".
std::string row_with(const std::string& json, const std::string& key, const std::string& value) {
  const size_t at = json.find("\"" + key + "\": \"" + value + "\"");
  if (at == std::string::npos) return "";
  const size_t begin = json.rfind('{', at);
  return json.substr(begin, json.find('}', at) - begin + 1);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class DeploySlurmTest : public ::testing::Test {
 protected:
  // One cluster for the suite: its daemons take seconds to start.
  static void SetUpTestSuite() {
    if (SlurmCluster::unavailable()) return;
    try {
      cluster_ = std::make_unique<SlurmCluster>();
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
  }
  static void TearDownTestSuite() { cluster_.reset(); }
  void SetUp() override {
    if (const auto why = SlurmCluster::unavailable()) GTEST_SKIP() << "no Slurm cluster: " << *why;
    ASSERT_TRUE(cluster_) << "the Slurm cluster did not start: " << start_error_;
  }
  // The `pronghorn train` process of rank `rank` of Slurm job `id`, or -1.
  static pid_t train_process(const std::string& id, int rank) {
    for (const pid_t pid : cluster_->job_processes(id)) {
      const std::string proc = "/proc/" + std::to_string(pid);
      std::string cmdline = slurp(proc + "/cmdline"), env = slurp(proc + "/environ");
      for (char& c : env) c = c == '\0' ? '\n' : c;
      if (cmdline.find(std::string("pronghorn") + '\0' + "train" + '\0') != std::string::npos &&
          ("\n" + env).find("\nSLURM_PROCID=" + std::to_string(rank) + "\n") != std::string::npos) {
        return pid;
      }
    }
    return -1;
  }

  static std::unique_ptr<SlurmCluster> cluster_;
  static std::string start_error_;
};

std::unique_ptr<SlurmCluster> DeploySlurmTest::cluster_;
std::string DeploySlurmTest::start_error_;

// The only run that trains to the target.
TEST_F(DeploySlurmTest, TrainSbatchTrainsCartPoleAcrossTwoNodesToTheTarget) {
  SlurmRun run;
  const std::string id = cluster_->sbatch(run.train_env(""), run.options("train", 2), kTrainScript);
  // (CartPole solves in seconds: status and scale are checked on the
  // longer run of LostRankIsResumedByTheRetryLoopAndTheJobCompletes.)
  const SlurmCluster::JobState end = cluster_->wait_job_end(id, 180s);
  const std::string log = run.log("train", id);
  EXPECT_EQ(end.state, "COMPLETED") << log;
  EXPECT_EQ(end.exit_code, "0:0") << log;
  EXPECT_NE(log.find("0: solved: mean return"), std::string::npos) << log;
  // n1 resolves nowhere: rank 0 is reached at its NodeAddr.
  EXPECT_NE(log.find("rank 0 at 127.0.0.1:"), std::string::npos) << log;
  EXPECT_NE(log.find("deploy/slurm: job " + id + " exits 0 after 1 attempt(s)"), std::string::npos)
      << log;
  EXPECT_EQ(slurp(run.job + "/exit_status").rfind("0 ", 0), 0u) << "rank 0's exit_status";
  EXPECT_TRUE(cluster_->job_processes(id).empty());
  EXPECT_TRUE(run.segments().empty());
}

// Both jobs as at a site that sets SLURM_EXPORT_ENV=NONE: sbatch itself is
// told --export=ALL, but the scripts' sruns see NONE and must override it.
TEST_F(DeploySlurmTest, LostRankIsResumedByTheRetryLoopAndTheJobCompletes) {
  SlurmRun run;
  const std::string export_none = "SLURM_EXPORT_ENV=NONE ";
  // A fixed length, no target; checkpoints every second; a lost peer noticed
  // within 3 s + 4 s. The length outlasts the setup below under load (8 M
  // steps, 15 s unloaded, once ended before the kill with ctest -j2).
  const std::string id = cluster_->sbatch(
      export_none + run.train_env("run.target_return=0 run.total_steps=14000000 "
                                  "run.checkpoint_interval_s=1 distributed.timeout_s=3",
                                  2),
      "--export=ALL " + run.options("train"), kTrainScript);
  const std::string actors = cluster_->sbatch(
      export_none + run.actors_env(), "--export=ALL " + run.options("actors"), kActorsScript);
  std::string status;
  ASSERT_TRUE(wait_for(
      [&] {
        status = run.status();
        return status.find("-actors-" + actors + "\", \"session\"") != std::string::npos &&
               fs::exists(run.job + "/checkpoints") && !fs::is_empty(run.job + "/checkpoints");
      },
      120s))
      << "the actor-only node joined and a checkpoint was written\n"
      << status << "\n"
      << run.log("train", id) << run.log("actors", actors);
  // While it trains: a row for each node in rank 0's status, and the scale of
  // node n2's actors reaches rank 1 through rank 0.
  ASSERT_TRUE(wait_for(
      [&] {
        status = run.status();
        return !row_with(status, "node_name", "n1").empty() &&
               !row_with(status, "node_name", "n2").empty();
      },
      120s))
      << status << "\n"
      << run.log("train", id);
  EXPECT_NE(row_with(status, "node_name", "n2").find("\"rank\": 1"), std::string::npos) << status;
  // As docs/deploy.md says to from a login node: a step in the job's
  // allocation on rank 0's node.
  const auto [code, scaled] = shell("srun --jobid " + id + " --overlap -w n1 " + kPronghorn +
                                    " scale --run-dir " + run.job + " --node n2 --actors 2");
  EXPECT_EQ(code, 0) << scaled;
  EXPECT_NE(scaled.find("actors: 1 → 2"), std::string::npos) << scaled;
  EXPECT_TRUE(wait_for(
      [&] {
        status = run.status();
        return row_with(status, "node_name", "n2").find("\"actors_desired\": 2") !=
               std::string::npos;
      },
      10s))
      << status;
  EXPECT_NE(row_with(status, "node_name", "n1").find("\"actors_desired\": 1"), std::string::npos)
      << "only n2 was scaled: " << status;

  const pid_t rank1 = train_process(id, 1);
  ASSERT_GT(rank1, 0) << "no `pronghorn train` of rank 1 in job " << id;
  // The rank runs although its srun saw NONE (the step inherits it as is).
  EXPECT_NE(slurp("/proc/" + std::to_string(rank1) + "/environ").find("SLURM_EXPORT_ENV=NONE"),
            std::string::npos)
      << "the scripts ran without SLURM_EXPORT_ENV=NONE: this test shows nothing";
  ASSERT_EQ(kill(rank1, SIGKILL), 0);

  const SlurmCluster::JobState end = cluster_->wait_job_end(id, 180s);
  const std::string log = run.log("train", id);
  EXPECT_EQ(end.state, "COMPLETED") << log;
  EXPECT_EQ(end.exit_code, "0:0") << log;
  // Rank 0 left by its own deadline naming the lost peer; rank 1 wrote nothing.
  EXPECT_NE(log.find("attempt 1 ended"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 0 (n1): 75 "), std::string::npos) << log;
  EXPECT_NE(log.find("rank 1: no exit_status"), std::string::npos) << log;
  EXPECT_NE(log.find("resuming the whole group"), std::string::npos) << log;
  EXPECT_NE(log.find("attempt 2 of 3"), std::string::npos) << log;
  EXPECT_NE(log.find("exits 0 after 2 attempt(s)"), std::string::npos) << log;
  EXPECT_NE(slurp(run.job + "/train.log").find("resumed from"), std::string::npos);
  EXPECT_EQ(slurp(run.job + "/exit_status").rfind("0 ", 0), 0u) << "rank 0's exit_status";

  // The node joined the resumed group at its new address, and left with the job.
  const SlurmCluster::JobState node_end = cluster_->wait_job_end(actors, 60s);
  const std::string node_log = run.log("actors", actors);
  EXPECT_EQ(node_end.state, "COMPLETED") << node_log;
  EXPECT_GE(count(node_log, ": joining "), 2u) << node_log;
  EXPECT_NE(node_log.find("the training job ended"), std::string::npos) << node_log;
  EXPECT_TRUE(cluster_->job_processes(id).empty());
  EXPECT_TRUE(cluster_->job_processes(actors).empty());
  EXPECT_TRUE(run.segments({"n1-actors-" + actors, "n2-actors-" + actors}).empty());
}

// A job Slurm requeues (as after a node failure, with --requeue) runs again
// under the same job id, so the same default RUN_NAME, and resumes the run
// from its checkpoint; the log keeps the first run's lines (--open-mode=append).
TEST_F(DeploySlurmTest, RequeuedJobResumesItsRun) {
  SlurmRun run;
  const std::string env = "RUN_DIR=" + run.runs + " PRONGHORN=" + kPronghorn +
                          " ACTORS_PER_NODE=1 MAX_RESTARTS=0 EXTRA_SETS='server.metrics_port=-1 "
                          "run.target_return=0 run.total_steps=500000000 "
                          "run.checkpoint_interval_s=1'";
  const std::string id = cluster_->sbatch(env, run.options("train"), kTrainScript);
  const std::string job = run.runs + "/pronghorn-" + id;  // RUN_NAME's default
  ASSERT_TRUE(wait_for(
      [&] { return fs::exists(job + "/checkpoints") && !fs::is_empty(job + "/checkpoints"); },
      120s))
      << run.log("train", id) << cluster_->logs();
  ASSERT_EQ(shell("scontrol requeue " + id).first, 0) << cluster_->logs();
  std::string log;
  EXPECT_TRUE(wait_for(
      [&] {
        log = run.log("train", id);
        const size_t requeued = log.find("(job requeued 1 time(s))");
        return requeued != std::string::npos &&
               log.find("info: resumed from " + job + "/checkpoints/", requeued) !=
                   std::string::npos;
      },
      120s))
      << log << cluster_->logs();
  EXPECT_EQ(count(log, "attempt 1 of 1"), 2u) << "the first run's lines were kept\n" << log;
  ASSERT_EQ(shell("scancel " + id).first, 0);
  EXPECT_EQ(cluster_->wait_job_end(id, 60s).state, "CANCELLED");
  EXPECT_TRUE(wait_for([&] { return cluster_->job_processes(id).empty(); }, 30s));
  EXPECT_TRUE(leftover_segments("pronghorn-" + id).empty());
  EXPECT_TRUE(leftover_segments("pronghorn-" + id + "-rank1").empty());
}

// Bad input is not retried: the job fails with the ranks' exit status 2
// after one attempt, although no rank got as far as writing a run directory.
TEST_F(DeploySlurmTest, RefusedConfigFailsOnceWithExitStatus2) {
  SlurmRun run;
  const std::string id = cluster_->sbatch(run.train_env("learner.batch_size=-3", 2),
                                          run.options("train"), kTrainScript);
  const SlurmCluster::JobState end = cluster_->wait_job_end(id, 60s);
  const std::string log = run.log("train", id);
  EXPECT_EQ(end.state, "FAILED") << log;
  EXPECT_EQ(end.exit_code, "2:0") << log;
  EXPECT_NE(log.find("learner.batch_size = -3"), std::string::npos) << log;
  EXPECT_NE(log.find("exits 2 after 1 attempt(s)"), std::string::npos) << log;
  EXPECT_EQ(log.find("attempt 2"), std::string::npos) << log;
}

TEST_F(DeploySlurmTest, ScancelLeavesNoProcessAndNoSharedMemory) {
  SlurmRun run;
  const std::string id =
      cluster_->sbatch(run.train_env("run.target_return=0 run.total_steps=500000000"),
                       run.options("train"), kTrainScript);
  const std::string actors =
      cluster_->sbatch(run.actors_env(), run.options("actors"), kActorsScript);
  std::string status;
  ASSERT_TRUE(wait_for(
      [&] {
        status = run.status();
        return !row_with(status, "node_name", "n2").empty() &&
               status.find("-actors-" + actors + "\", \"session\"") != std::string::npos;
      },
      120s))
      << status << "\n"
      << run.log("train", id) << run.log("actors", actors);
  ASSERT_FALSE(run.segments().empty()) << "a running job has shared memory to leave behind";

  ASSERT_EQ(shell("scancel " + id).first, 0);
  EXPECT_EQ(cluster_->wait_job_end(id, 60s).state, "CANCELLED");
  EXPECT_EQ(cluster_->wait_job_end(actors, 60s).state, "COMPLETED")
      << "the nodes leave once the training job is gone\n"
      << run.log("actors", actors);
  EXPECT_TRUE(wait_for(
      [&] {
        return cluster_->job_processes(id).empty() && cluster_->job_processes(actors).empty();
      },
      30s))
      << "scancel left processes of the job";
  EXPECT_TRUE(run.segments({"n1-actors-" + actors, "n2-actors-" + actors}).empty());
}

}  // namespace
