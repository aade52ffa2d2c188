// run.deterministic end to end, as real processes: the same config and seed
// run twice give the same checkpoints, byte for byte (CartPole to solved,
// Pendulum for 2 M steps, two actors each); learner.on_policy acts each batch
// with the policy that trains on it; what it cannot hold is refused with one
// line; an actor that dies ends the job.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace pronghorn::testing;

struct Outcome {
  int code = -1;
  std::string output;
  std::map<std::string, std::string> checkpoints;  // file name → bytes
};

// `pronghorn train` with `args` in run directory `dir`, at most 180 s.
Outcome train(const std::string& dir, const std::string& args) {
  std::filesystem::remove_all(dir);
  const auto name = std::filesystem::path(dir).filename().string();
  Outcome o;
  std::tie(o.code, o.output) =
      shell("timeout -s KILL 180 " + std::string(PRONGHORN_BIN) + " train --run-dir " + dir +
            " --set run.name=" + name +
            " --set server.address=127.0.0.1:0 --set server.metrics_port=0 " + args);
  o.checkpoints = checkpoint_files(dir);
  return o;
}

// Two runs of `args` (suffixes -a and -b); both must end with exit 0.
std::pair<Outcome, Outcome> run_twice(const TrainRun& run, const std::string& args) {
  Outcome a = train(run.dir + "-a", args), b = train(run.dir + "-b", args);
  EXPECT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(b.code, 0) << b.output;
  return {std::move(a), std::move(b)};
}

void expect_same_checkpoints(const Outcome& a, const Outcome& b) {
  pronghorn::testing::expect_same_checkpoints(a.checkpoints, b.checkpoints);
}

const std::string kDeterministic = "--set run.deterministic=true --set actor.count=2 ";

TEST(DeterministicTest, TwoCartPoleRunsToSolvedWriteTheSameCheckpoints) {
  TrainRun run;
  const auto [a, b] = run_twice(run, kDeterministic + "--set run.total_steps=20000000");
  EXPECT_NE(a.output.find("solved"), std::string::npos) << a.output;
  EXPECT_TRUE(a.checkpoints.count("best.ckpt")) << "an evaluation confirmed the target";
  expect_same_checkpoints(a, b);
}

TEST(DeterministicTest, TwoPendulumRunsOfTwoMillionStepsWriteTheSameCheckpoints) {
  TrainRun run;
  const auto [a, b] = run_twice(
      run, kDeterministic + "-c " + PRONGHORN_SOURCE_DIR +
               "/configs/pendulum.toml --set run.total_steps=2000000 --set run.target_return=0 "
               "--set run.checkpoint_interval_steps=500000 --set run.eval_interval_steps=700000");
  // Batches of 64 envs × 32 steps × 4 unrolls = 8192 env steps: each
  // checkpoint at the first batch at or past a multiple of 500 000 (the
  // newest 3 kept), and the last one at the end.
  EXPECT_EQ(a.checkpoints.size(), 5u) << "3 checkpoints, best.ckpt and best.json";
  for (const char* name :
       {"env-steps-00000000000001007616.ckpt", "env-steps-00000000000001507328.ckpt",
        "env-steps-00000000000002007040.ckpt"}) {
    EXPECT_TRUE(a.checkpoints.count(name)) << name;
  }
  expect_same_checkpoints(a, b);
}

// learner.on_policy: every batch's unrolls were acted by the policy version
// the learner trains them from (lag 0), where run.deterministic alone acts
// each with the version before (lag 1, while the learner trains on the last
// batch); the run stays deterministic.
TEST(DeterministicTest, OnPolicyActsEachBatchWithThePolicyThatTrainsOnIt) {
  TrainRun run;
  const std::string ppo = kDeterministic + "-c " + PRONGHORN_SOURCE_DIR +
                          "/configs/cartpole_ppo.toml --set learner.batch_size=2 "
                          "--set learner.ring_slots=4 --set run.total_steps=60000 "
                          "--set run.target_return=0 --set run.report_interval_s=0.05 ";
  const auto [a, b] = run_twice(run, ppo + "--set learner.on_policy=true");
  expect_same_checkpoints(a, b);
  const double batches = last_metric(run.dir + "-a", "learner_steps");
  EXPECT_GE(batches, 100) << "2 actors × 8 envs × 32 steps a batch of 60 000 steps";
  EXPECT_EQ(last_metric(run.dir + "-a", "policy_lag_max"), 0);
  const Outcome lagged = train(run.dir + "-c", ppo);
  EXPECT_EQ(lagged.code, 0) << lagged.output;
  EXPECT_EQ(last_metric(run.dir + "-c", "policy_lag_max"), 1);
  EXPECT_NE(lagged.checkpoints, a.checkpoints) << "the lag changes what is trained";
}

// A refusal's lines, less the info lines of a start that swept another run's
// shared memory (a test beside this one may have just killed its learner).
std::vector<std::string> refusal_lines(const std::string& output) {
  std::vector<std::string> lines = lines_of(output);
  std::erase_if(lines, [](const std::string& line) {
    return line.find(" info: removed stale shared memory ") != std::string::npos;
  });
  return lines;
}

TEST(DeterministicTest, WhatItCannotHoldIsRefusedInOneLine) {
  TrainRun run;
  struct Case {
    std::string args, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"--set actor.count=2 --set learner.batch_size=3",
            "learner.batch_size = 3 must be a multiple of the 2 actors"},
           {"--set actor.count=auto", "expected actor.count set to a number"},
           {"--set actor.count=0", "expected actor.count above 0"},
           {"--set actor.count=1 --set learner.batch_size=9 --set learner.ring_slots=16",
            "learner.ring_slots = 16: run.deterministic = true needs at least 2 × "
            "learner.batch_size = 18"},
           {"--set actor.count=1 --set remote.address=127.0.0.1:0",
            "expected remote.address empty"},
       }) {
    const Outcome o = train(run.dir, "--set run.deterministic=true " + c.args);
    EXPECT_EQ(o.code, 2) << c.args << "\n" << o.output;
    EXPECT_NE(o.output.find(c.expected), std::string::npos) << c.args << "\n" << o.output;
    EXPECT_EQ(refusal_lines(o.output).size(), 1u) << c.args << "\n" << o.output;
  }
  const Outcome o = train(run.dir, "--set learner.on_policy=true");
  EXPECT_EQ(o.code, 2) << o.output;
  EXPECT_NE(o.output.find("learner.on_policy = true: expected run.deterministic = true"),
            std::string::npos)
      << o.output;
}

// The actor processes among `pid`'s children, by their command line.
std::vector<pid_t> actors_of(pid_t pid) {
  std::vector<pid_t> out = children_of(pid);
  std::erase_if(out, [](pid_t child) {
    return slurp("/proc/" + std::to_string(child) + "/cmdline").find("actor-process") ==
           std::string::npos;
  });
  return out;
}

TEST(DeterministicTest, AnActorThatDiesEndsTheJobInOneLineAndScaleIsRefused) {
  TrainRun run;
  pid_t pid = start_pronghorn({"train", "--run-dir", run.dir, "--set", "run.name=" + run.name,
                               "--set", "run.deterministic=true", "--set", "actor.count=2", "--set",
                               "run.target_return=0", "--set", "run.total_steps=1000000000",
                               "--set", "run.report_interval_s=0.2", "--set",
                               "server.address=127.0.0.1:0", "--set", "server.metrics_port=0"});
  StopOnExit guard{pid};
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "env_steps") > 0; }));

  const auto [code, out] =
      shell(std::string(PRONGHORN_BIN) + " scale --actors 3 --run-dir " + run.dir);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("run.deterministic = true: this job's 2 actors are fixed"), std::string::npos)
      << out;

  const std::vector<pid_t> actors = actors_of(pid);
  ASSERT_EQ(actors.size(), 2u);
  ASSERT_EQ(kill(actors[1], SIGKILL), 0);
  int status = -1;
  ASSERT_TRUE(ended_within(guard.pid, status, std::chrono::seconds(30)));
  EXPECT_EQ(status, 1);
  EXPECT_NE(slurp(run.dir + "/train.log").find("an actor died and was restarted"),
            std::string::npos);
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

}  // namespace
