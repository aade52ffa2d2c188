// `pronghorn train` end to end, as real processes: it learns CartPole, loses
// no unroll, survives a killed actor or zygote, leaves nothing behind even
// killed; an LSTM core learns the env a memoryless policy cannot.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;

// Any free ports for the control plane, so runs never clash with each other
// or with a job on the default ports.
pid_t start_train(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"train", "--set", "server.address=127.0.0.1:0", "--set",
                                  "server.metrics_port=0"};
  all.insert(all.end(), args.begin(), args.end());
  return start_pronghorn(all);
}

// A job that trains until the test stops it, reporting every 0.2 s.
pid_t start_endless(const TrainRun& run, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--run-dir", run.dir,
                                   "--set",     "run.name=" + run.name,
                                   "--set",     "run.target_return=0",
                                   "--set",     "run.total_steps=1000000000",
                                   "--set",     "run.report_interval_s=0.2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return start_train(args);
}

TEST(TrainTest, LearnsCartPoleWellAboveRandomAndAccountsForEveryUnroll) {
  TrainRun run;
  // Trained to 300 so the saved policy is past the unstable early phase: the
  // eval below checks the checkpoint, not the training episodes.
  pid_t pid = start_train({"--run-dir", run.dir, "--set", "run.name=" + run.name, "--set",
                           "run.target_return=300", "--set", "run.total_steps=30000000", "--set",
                           "run.report_interval_s=0.2"});
  StopOnExit guard{pid};
  EXPECT_EQ(wait_exit(pid), 0);
  guard.pid = -1;
  // A random policy averages about 22; the run stopped because it reached 300.
  EXPECT_GE(last_metric(run.dir, "episode_return_mean"), 150.0);
  // CartPole pays 1 a step: the mean length is the mean return.
  EXPECT_NEAR(last_metric(run.dir, "episode_length_mean"),
              last_metric(run.dir, "episode_return_mean"), 1e-3);
  const double committed = last_metric(run.dir, "unrolls_committed");
  const double consumed = last_metric(run.dir, "unrolls_consumed");
  const double dropped = last_metric(run.dir, "unrolls_dropped_stale");
  const double waiting = last_metric(run.dir, "ring_occupancy");
  EXPECT_GT(consumed, 10);
  EXPECT_EQ(committed, consumed + dropped + waiting) << "nothing lost, nothing twice";
  const double untrained = last_metric(run.dir, "unrolls_untrained");
  EXPECT_LE(untrained, 2) << "at most the one batch (B=2) prepared during the last step";
  EXPECT_EQ(last_metric(run.dir, "env_steps"), (consumed - untrained) * 16 * 32)
      << "every trained step came from a consumed unroll (T=16, K=32)";
  EXPECT_TRUE(std::filesystem::exists(run.dir + "/config.toml"));
  EXPECT_TRUE(std::filesystem::exists(run.dir + "/train.log"));
  EXPECT_TRUE(std::filesystem::exists(run.dir + "/curves.svg"));
  EXPECT_TRUE(leftover_segments(run.name).empty());

  // The run's best checkpoint (its best evaluation's policy, which reached
  // the target) holds the trained policy.
  ASSERT_TRUE(std::filesystem::exists(run.dir + "/checkpoints/best.ckpt"));
  const std::string out = ::testing::TempDir() + "/eval-" + run.name + ".txt";
  const std::string command =
      std::string(PRONGHORN_BIN) + " eval " + run.dir + " --episodes 50 --greedy > " + out;
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::ifstream in(out);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("return mean ");
  ASSERT_NE(at, std::string::npos) << text;
  // The most likely action of the untrained network, always the same, lasts
  // about 9 steps, random play 22. At the default learning rate the policy at
  // the moment training stops can have collapsed while the last 100 episodes,
  // begun by older policies, still average 300 (30 seen under ASan), so this
  // run learns at a calmer 3e-3. The bar is twice random play.
  EXPECT_GT(std::stod(text.substr(at + 12)), 44.0) << text;
}

TEST(TrainTest, KilledActorIsRestartedAndTrainingGoesOn) {
  TrainRun run;
  pid_t pid = start_endless(run);
  StopOnExit guard{pid};
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "env_steps") > 0; }));
  std::vector<pid_t> actors = children_of(pid);
  ASSERT_EQ(actors.size(), 1u);
  ASSERT_EQ(kill(actors[0], SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "actor_restarts") >= 1; }));
  const double steps_after_restart = last_metric(run.dir, "env_steps");
  ASSERT_TRUE(wait_for([&] {
    return last_metric(run.dir, "env_steps") > steps_after_restart + 1e5;
  })) << "training goes on with the restarted actor";
  EXPECT_EQ(last_metric(run.dir, "actors_alive"), 1);
  std::vector<pid_t> now = children_of(pid);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], actors[0]);
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 0);
  guard.pid = -1;
  EXPECT_NE(kill(now[0], 0), 0) << "the actor is gone with the learner";
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// `timeout`, Slurm's scancel and the like signal the whole process group:
// the actors stop on it as the learner does, and none is restarted or
// counted as a death, also while a long learner step (30 passes over 8
// unrolls) keeps the learner from seeing its own signal at once.
TEST(TrainTest, ASigtermToTheProcessGroupStopsTheJobWithNoActorRestarted) {
  TrainRun run;
  const auto [code, out] = shell(
      "timeout -s TERM 5 " + std::string(PRONGHORN_BIN) + " --log-level info train --run-dir " +
      run.dir + " --set server.address=127.0.0.1:0 --set server.metrics_port=-1" +
      " --set run.target_return=0 --set run.total_steps=1000000000000" +
      " --set actor.count=2 --set actor.oversubscribe=true --set learner.epochs=30" +
      " --set learner.batch_size=8");
  EXPECT_EQ(code, 124) << "timeout's exit status when it signalled: " << out;
  std::ifstream in(run.dir + "/train.log");
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("info: stopped after "), std::string::npos) << log;
  EXPECT_EQ(log.find("restarting"), std::string::npos) << log;
  EXPECT_EQ(last_metric(run.dir, "actor_restarts"), 0);
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// Actors are forks of the zygote made at the top of `pronghorn train`'s main
// (fleet/zygote.h); with the zygote killed they start by posix_spawn, said
// once, and the job goes on. Either way they run at actor.nice, and the
// learner at its own priority.
TEST(TrainTest, ActorsComeFromTheZygoteAndFromPosixSpawnOnceItIsKilled) {
  TrainRun run;
  pid_t pid = start_endless(run, {"--set", "actor.nice=7"});
  StopOnExit guard{pid};
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "env_steps") > 0; }));
  const pid_t zygote = zygote_of(pid);
  ASSERT_GT(zygote, 0);
  const std::vector<pid_t> actors = children_of(pid);
  ASSERT_EQ(actors.size(), 1u);
  const auto environment = [](pid_t p) { return slurp("/proc/" + std::to_string(p) + "/environ"); };
  const std::string cmdline = slurp("/proc/" + std::to_string(actors[0]) + "/cmdline");
  EXPECT_NE(cmdline.find("actor-process"), std::string::npos) << "its own command line shows";
  // An executed actor's start-up area holds the environment it was given,
  // the learner's; a forked one's holds the zygote's titles.
  EXPECT_NE(environment(actors[0]), environment(pid)) << "forked, not executed";
  const auto nice_of = [](pid_t p) { return getpriority(PRIO_PROCESS, static_cast<id_t>(p)); };
  const int want = std::max(7, getpriority(PRIO_PROCESS, 0));  // never raised above the test's
  EXPECT_TRUE(wait_for([&] { return nice_of(actors[0]) == want; })) << nice_of(actors[0]);
  EXPECT_EQ(nice_of(pid), getpriority(PRIO_PROCESS, 0)) << "the learner's own is unchanged";

  ASSERT_EQ(kill(zygote, SIGKILL), 0);
  uint64_t restarts = 0;
  pid_t actor = actors[0];
  for (int round = 0; round < 2; ++round) {  // the first start without the zygote, and one more
    ASSERT_EQ(kill(actor, SIGKILL), 0);
    ++restarts;
    ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "actor_restarts") >= restarts; }));
    ASSERT_TRUE(wait_for([&] {
      const std::vector<pid_t> now = children_of(pid);
      return now.size() == 1 && now[0] != actor;
    }));
    actor = children_of(pid)[0];
    EXPECT_EQ(environment(actor), environment(pid)) << "executed afresh";
    EXPECT_TRUE(wait_for([&] { return nice_of(actor) == want; }))
        << "set by the actor as it starts";
  }
  const double steps = last_metric(run.dir, "env_steps");
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "env_steps") > steps + 1e5; }))
      << "training goes on with the executed actor";
  EXPECT_EQ(zygote_of(pid), -1) << "the dead zygote was reaped";
  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 0);
  guard.pid = -1;
  const std::string log = slurp(run.dir + "/train.log");
  const std::string line =
      "the zygote is gone (it was killed by SIGKILL); actors start by posix_spawn from now on";
  const size_t at = log.find(line);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(line, at + 1), std::string::npos) << "said once";
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

TEST(TrainTest, KilledLearnerResumesFromItsCheckpointWithoutGoingBackwards) {
  TrainRun run;
  pid_t first = start_endless(run, {"--set", "run.checkpoint_interval_s=0.3"});
  StopOnExit first_guard{first};
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "episode_return_mean") > 60; }))
      << "learning before the kill";
  ASSERT_TRUE(wait_for([&] {
    return std::filesystem::exists(run.dir + "/checkpoints") &&
           !std::filesystem::is_empty(run.dir + "/checkpoints");
  }));
  std::this_thread::sleep_for(400ms);
  std::vector<pid_t> actors = children_of(first);
  const pid_t zygote = zygote_of(first);
  EXPECT_GT(zygote, 0);
  kill(first, SIGKILL);
  EXPECT_EQ(wait_exit(first), 128 + SIGKILL);
  first_guard.pid = -1;
  // Checked at once: any learner starting on this machine removes a dead one's.
  EXPECT_FALSE(leftover_segments(run.name).empty()) << "a killed learner cannot clean up";
  const double steps_at_kill = last_metric(run.dir, "env_steps");
  const double version_at_kill = last_metric(run.dir, "policy_version");
  auto metric_lines = [&] {
    std::ifstream in(run.dir + "/metrics.jsonl");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  const size_t lines_at_kill = metric_lines().size();
  for (pid_t actor : actors) {  // orphaned actors notice the learner is gone and exit
    EXPECT_TRUE(wait_for([&] { return kill(actor, 0) != 0; })) << "actor " << actor;
  }
  // The zygote's socket closed with the learner.
  EXPECT_TRUE(wait_for([&] { return kill(zygote, 0) != 0; })) << "zygote " << zygote;

  pid_t second = start_train({"--resume", run.dir, "--set", "run.checkpoint_interval_s=0.3"});
  StopOnExit second_guard{second};
  // The resumed run's first report continues the counters, never restarts them.
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "env_steps") > steps_at_kill; }));
  // The resumed learner's first line follows the dead one's last.
  const std::vector<std::string> lines = metric_lines();
  ASSERT_GT(lines_at_kill, 0u);
  ASSERT_GT(lines.size(), lines_at_kill) << "no line from the resumed learner";
  auto value = [&](const std::string& l, const std::string& key) {
    return std::stod(l.substr(l.find("\"" + key + "\": ") + key.size() + 4));
  };
  const double resumed_steps = value(lines[lines_at_kill], "env_steps");
  const double resumed_version = value(lines[lines_at_kill], "policy_version");
  const double previous_version = value(lines[lines_at_kill - 1], "policy_version");
  EXPECT_GT(resumed_steps, 0.5 * steps_at_kill) << "counters continue from the checkpoint";
  EXPECT_GT(resumed_version, 0.5 * version_at_kill);
  EXPECT_GT(previous_version, 0);
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "episode_return_mean") > 60; }))
      << "the resumed run keeps learning";
  EXPECT_TRUE(wait_for([&] { return leftover_segments(run.name).size() == 2; }))
      << "the dead learner's segments were removed; only the live ring and slab remain";
  kill(second, SIGTERM);
  EXPECT_EQ(wait_exit(second), 0);
  second_guard.pid = -1;
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// configs/memory.toml: the answer depends on a cue 5 to 10 steps back, so
// only a policy that carries its state through steps, unrolls and the
// learner's replay of them reaches 0.9 (a memoryless one is stuck at 0.5;
// BENCHMARKS.md). The run stops at 5 M env steps if it never gets there.
TEST(TrainTest, AnLstmCoreLearnsTheEnvThatNeedsMemory) {
  TrainRun run;
  // timeout: the deadline of the wait (SIGTERM stops the job cleanly).
  const auto [code, out] =
      shell("timeout 300 " + std::string(PRONGHORN_BIN) + " --log-level warn train -c " +
            PRONGHORN_SOURCE_DIR + "/configs/memory.toml --run-dir " + run.dir +
            " --set run.name=" + run.name +
            " --set server.address=127.0.0.1:0 --set server.metrics_port=0");
  ASSERT_EQ(code, 0) << out;
  double eval_mean = 0;
  const size_t at = out.find("solved: mean return ");
  ASSERT_NE(at, std::string::npos) << "did not reach 0.9 within 5 M env steps:\n" << out;
  ASSERT_EQ(std::sscanf(out.c_str() + at, "solved: mean return %lf", &eval_mean), 1) << out;
  EXPECT_GE(eval_mean, 0.9);
  // `pronghorn eval` carries the state too: its greedy policy remembers.
  const auto [eval_code, eval_out] =
      shell(std::string(PRONGHORN_BIN) + " eval " + run.dir + " --episodes 100 --json");
  ASSERT_EQ(eval_code, 0) << eval_out;
  double mean = 0;
  const size_t key = eval_out.find("\"return_mean\": ");
  ASSERT_NE(key, std::string::npos) << eval_out;
  ASSERT_EQ(std::sscanf(eval_out.c_str() + key, "\"return_mean\": %lf", &mean), 1) << eval_out;
  EXPECT_GE(mean, 0.9) << eval_out;
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// The batch prepared while the last step trained must not move the figures
// after the run has said where it ended: the "solved" line, the last
// metrics.jsonl line and the final checkpoint are one state.
TEST(TrainTest, TheSolvedLineAgreesWithTheLastMetricsLineAndTheCheckpoint) {
  TrainRun run;
  const auto [code, out] =
      shell(std::string(PRONGHORN_BIN) + " --log-level warn train --run-dir " + run.dir +
            " --set server.address=127.0.0.1:0 --set " +
            "server.metrics_port=0 --set run.target_return=60 --set " + "run.total_steps=30000000");
  ASSERT_EQ(code, 0) << out;
  double eval_mean = 0, mean = 0;
  unsigned long long steps = 0;
  const size_t at = out.find("solved: mean return ");
  ASSERT_NE(at, std::string::npos) << out;
  ASSERT_EQ(std::sscanf(out.c_str() + at,
                        "solved: mean return %lf ≥ %*f on evaluation (%*d greedy episodes; "
                        "training %lf over the last 100) after %*f s and %llu env steps",
                        &eval_mean, &mean, &steps),
            3)
      << out;
  EXPECT_GE(eval_mean, 60.0) << "the target is judged on evaluation";
  EXPECT_EQ(last_metric(run.dir, "env_steps"), static_cast<double>(steps));
  EXPECT_NEAR(last_metric(run.dir, "episode_return_mean"), mean, 0.05);
  char name[64];
  std::snprintf(name, sizeof name, "/checkpoints/env-steps-%020llu.ckpt", steps);
  EXPECT_TRUE(std::filesystem::exists(run.dir + name)) << "the final checkpoint is at " << steps;
}

// learner.threads = 0 is what its help says: the cores the node's actors
// leave (cores − actors × actor.threads), at least one; a number is taken as
// it is. Two cores here, by taskset.
TEST(TrainTest, LearnerThreadsZeroTakesTheCoresTheActorsLeave) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || !CPU_ISSET(0, &allowed) ||
      !CPU_ISSET(1, &allowed)) {
    GTEST_SKIP() << "needs CPUs 0 and 1";
  }
  struct Case {
    const char* actors;
    const char* threads;
    const char* line;
  };
  for (const Case& c :
       {Case{"0", "0", "learner: 2 compute threads"}, Case{"1", "0", "learner: 1 compute thread "},
        Case{"3", "0", "learner: 1 compute thread "},
        Case{"1", "3", "learner: 3 compute threads"}}) {
    const TrainRun run;
    std::filesystem::remove_all(run.dir);
    // Its stderr in a file: the debug line is there at once (train.log's
    // writes are buffered).
    const std::string err = run.dir + ".err";
    const std::string command =
        "exec taskset -c 0,1 " + std::string(PRONGHORN_BIN) +
        " --log-level debug train --run-dir " + run.dir +
        " --set server.address=127.0.0.1:0 --set server.metrics_port=-1"
        " --set run.target_return=0 --set actor.oversubscribe=true --set actor.count=" +
        c.actors + " --set learner.threads=" + c.threads + " 2>" + err;
    StopOnExit job{spawn("/bin/sh", {"-c", command})};
    ASSERT_GT(job.pid, 0);
    const bool logged =
        wait_for([&] { return slurp(err).find("compute thread") != std::string::npos; }, 30s);
    const std::string log = slurp(err);
    EXPECT_TRUE(logged) << log;
    EXPECT_NE(log.find(c.line), std::string::npos)
        << "actor.count=" << c.actors << " learner.threads=" << c.threads << ":\n"
        << log;
    kill(job.pid, SIGTERM);
    EXPECT_EQ(wait_exit(job.pid), 0);
    job.pid = -1;
    std::filesystem::remove(err);
    std::filesystem::remove_all(run.dir);
  }
}

}  // namespace
