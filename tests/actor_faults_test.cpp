// Actors that fail, as real `pronghorn train` jobs with an env plugin whose
// step crashes, fails or hangs (tests/testing/crashing_env.c): a job whose
// actors keep dying or stall ends with exit status 1 and one line naming the
// last death, leaving no process and no shared memory; a kill storm from
// outside costs seconds and never ends the job; a learner with no actor is
// waiting, not stalled; and a node takes no more actors than it holds.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;

// A `pronghorn train` job on any free ports, trained until the test ends it,
// its stderr in a file; `prefix` runs before it (taskset).
struct Job {
  std::string name = "actor-faults-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string dir = ::testing::TempDir() + "/" + name;
  std::string err = dir + ".err";
  pid_t pid = -1;
  int status = -1;  // once ended: the exit status, or 128 + signal

  explicit Job(const std::vector<std::string>& extra, const std::string& prefix = "") {
    std::filesystem::remove_all(dir);
    std::vector<std::string> args = job_args(dir, name);
    args.insert(args.end(), {"--set", "run.report_interval_s=0.2"});
    args.insert(args.end(), extra.begin(), extra.end());
    std::string command = "exec " + prefix + " " + PRONGHORN_BIN + " --log-level warn";
    for (const std::string& a : args) command += " '" + a + "'";
    pid = spawn("/bin/sh", {"-c", command + " 2>" + err});
  }
  ~Job() {
    if (pid > 0 && kill(pid, SIGTERM) == 0) wait_exit(pid);
  }
  // Waits up to `timeout` for the job to end by itself; whether it did.
  bool ended(std::chrono::milliseconds timeout) { return ended_within(pid, status, timeout); }
  bool running() const { return pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0; }
  double metric(const std::string& key) const { return last_metric(dir, key); }
  // The last line of stderr, after any progress line ended by '\r'.
  std::string last_line() const { return last_line_of(err); }
  // Processes of this job still running: the learner or actors, which carry
  // the run's config path on their command line.
  std::vector<std::string> processes() const {
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::string cmdline = slurp(entry.path().string() + "/cmdline");
      for (char& ch : cmdline) ch = ch == '\0' ? ' ' : ch;
      if (cmdline.find(dir + "/config.toml") != std::string::npos) found.push_back(cmdline);
    }
    return found;
  }
  void expect_nothing_left() const {
    EXPECT_TRUE(processes().empty()) << processes().front();
    EXPECT_TRUE(leftover_segments(name).empty());
  }
};

// The job's arguments for the crashing env misbehaving as `mode`, then `extra`.
std::vector<std::string> crashing(const std::string& mode, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--set", "env.plugin=" + std::string(CRASHING_ENV), "--set",
                                   "env.name=" + mode};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(ActorFaultsTest, SegfaultingActorsEndTheJobWithOneLineNamingTheSignal) {
  Job job(crashing("segv", {"--set", "actor.count=2", "--set", "actor.max_crashes=3"}));
  ASSERT_TRUE(job.ended(60s)) << "the job ends; it does not restart its actors forever:\n"
                              << slurp(job.err);
  EXPECT_EQ(job.status, 1);
  EXPECT_TRUE(std::regex_match(
      job.last_line(),
      // 4 when both actors' crashes are reaped in one poll
      std::regex("pronghorn: actors keep crashing: [34] in a row with no unroll committed; last: "
                 "actor [01] killed by SIGSEGV \\(actor.max_crashes = 3\\)")))
      << slurp(job.err);
  job.expect_nothing_left();
  EXPECT_TRUE(std::filesystem::exists(job.dir + "/config.toml")) << "the run is kept";
}

TEST(ActorFaultsTest, ActorsFailingOnAnEnvErrorEndTheJobWithTheirLastLine) {
  Job job(crashing("error", {"--set", "actor.max_crashes=2"}));
  ASSERT_TRUE(job.ended(60s)) << slurp(job.err);
  EXPECT_EQ(job.status, 1);
  const std::string actor_said =
      std::string("env plugin ") + CRASHING_ENV + " (env \"error\"): step failed: reward NaN";
  EXPECT_EQ(job.last_line(),
            "pronghorn: actors keep crashing: 2 in a row with no unroll committed; last: actor 0 "
            "exited 1: " +
                actor_said + " (actor.max_crashes = 2)");
  EXPECT_NE(slurp(job.err).find("\npronghorn: " + actor_said + "\n"), std::string::npos)
      << "the actor's own line is passed on unchanged:\n"
      << slurp(job.err);
  job.expect_nothing_left();
}

TEST(ActorFaultsTest, ActorsThatAbortOrExitAreNamedByHow) {
  const std::pair<std::string, std::string> cases[] = {
      {"abort", "actor 0 killed by SIGABRT"},
      {"exit", "actor 0 exited 3: crashing_env: giving up"}};
  for (const auto& [mode, how] : cases) {
    Job job(crashing(mode, {"--set", "actor.max_crashes=1"}));
    ASSERT_TRUE(job.ended(60s)) << mode << "\n" << slurp(job.err);
    EXPECT_EQ(job.status, 1) << mode;
    EXPECT_EQ(job.last_line(),
              "pronghorn: actors keep crashing: 1 in a row with no unroll committed; last: " + how +
                  " (actor.max_crashes = 1)");
    job.expect_nothing_left();
  }
}

// Every actor life commits unrolls before its env fails (every 50th step),
// so no crash streak builds: the crash rate ends the job, its health line
// having said so while it built.
TEST(ActorFaultsTest, ActorsCrashingBetweenUnrollsEndTheJobOnTheCrashRate) {
  Job job(crashing("flaky", {"--set", "actor.unroll_length=16"}));
  ASSERT_TRUE(job.ended(60s)) << "the job ends; it does not restart its actors forever:\n"
                              << slurp(job.err);
  EXPECT_EQ(job.status, 1);
  EXPECT_TRUE(std::regex_match(
      job.last_line(),
      std::regex("pronghorn: actors crash too often: [0-9]+ crashes against [0-9]+ unrolls "
                 "committed in the last [0-9]+ s; last: actor 0 exited 1: env plugin .* \\(env "
                 "\"flaky\"\\): step failed: flaky step \\(actor.max_crash_rate = 0.2 per "
                 "unroll\\)")))
      << slurp(job.err);
  EXPECT_NE(slurp(job.dir + "/metrics.jsonl").find("actors crashing: "), std::string::npos)
      << "the health line said so while it built";
  job.expect_nothing_left();
}

// An env that crashes only at an evaluation's batch size (10 envs for
// run.eval_episodes = 10) never fails an actor (16 envs): its evaluation
// process dies, and the job ends as with crashing actors, never the learner
// killed by the signal.
TEST(ActorFaultsTest, AnEvaluationThatCrashesEndsTheJobWithOneLineNamingThePlugin) {
  Job job(crashing("segv10", {"--set", "env.num_envs=16", "--set", "run.eval_episodes=10", "--set",
                              "run.eval_interval_s=1"}));
  ASSERT_TRUE(job.ended(60s)) << slurp(job.err);
  EXPECT_EQ(job.status, 1) << slurp(job.err);
  EXPECT_TRUE(std::regex_match(
      job.last_line(),
      std::regex("pronghorn: the evaluation process \\(pid [0-9]+\\) killed by SIGSEGV; env "
                 "plugin .*crashing_env[^ ]* \\(env \"segv10\"\\), 10 envs at once "
                 "\\(run.eval_episodes = 10\\), evaluating the policy at [0-9]+ env steps")))
      << slurp(job.err);
  EXPECT_NE(job.last_line().find(CRASHING_ENV), std::string::npos) << job.last_line();
  EXPECT_EQ(slurp(job.dir + "/exit_status").rfind("1 the evaluation process", 0), 0u)
      << "the run records how it ended: " << slurp(job.dir + "/exit_status");
  job.expect_nothing_left();
  EXPECT_FALSE(std::filesystem::exists(job.dir + "/checkpoints/evaluating.ckpt"));
}

TEST(ActorFaultsTest, AnEnvStepThatNeverReturnsEndsTheJobAfterTheStallTimeout) {
  Job job(crashing("hang", {"--set", "actor.stall_timeout_s=2"}));
  // It trained before the env hung: a job with no unroll yet waits 60 s
  // longer (ActorWatchdog::kStartAllowance).
  ASSERT_TRUE(job.ended(30s)) << slurp(job.err);
  EXPECT_EQ(job.status, 1);
  EXPECT_TRUE(std::regex_match(
      job.last_line(),
      std::regex("pronghorn: actors stalled: no unroll committed for [23] s with 1 actor wanted; "
                 "every actor is alive: an env step or the policy never returns\\? "
                 "\\(actor.stall_timeout_s = 2\\)")))
      << slurp(job.err);
  // The run's last metrics line says how it ended, the counters as they were.
  const std::vector<std::string> lines = lines_of(slurp(job.dir + "/metrics.jsonl"));
  ASSERT_FALSE(lines.empty());
  const std::string& last = lines.back();
  EXPECT_NE(last.find("\"state\": \"failed\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"end_reason\": \"actors stalled: no unroll committed for "),
            std::string::npos)
      << last;
  EXPECT_GT(job.metric("env_steps"), 0);
  job.expect_nothing_left();  // the hung actor ignores SIGTERM: killed
}

TEST(ActorFaultsTest, ALearnerWithNoActorWaitsNotStalledAndTrainsOnceScaledUp) {
  Job job({"--set", "actor.count=0", "--set", "actor.stall_timeout_s=1"});
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(job.dir + "/server.address"); }));
  std::this_thread::sleep_for(3s);
  ASSERT_TRUE(job.running()) << "no actor wanted is no stall:\n" << slurp(job.err);
  EXPECT_TRUE(children_of(job.pid).empty()) << "actor.count = 0 starts no actor";
  // Waiting, it still reports every run.report_interval_s (0.2 s here).
  int waiting_lines = 0;
  for (const std::string& line : lines_of(slurp(job.dir + "/metrics.jsonl"))) {
    if (line.find("\"env_steps\": 0,") != std::string::npos &&
        line.find("\"state\": \"running\"") != std::string::npos) {
      ++waiting_lines;
    }
  }
  EXPECT_GE(waiting_lines, 5) << slurp(job.dir + "/metrics.jsonl");
  const auto [code, out] =
      shell(std::string(PRONGHORN_BIN) + " scale --run-dir " + job.dir + " --actors 1");
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(wait_for([&] { return job.metric("env_steps") > 0; })) << slurp(job.err);
  EXPECT_TRUE(job.running());
}

TEST(ActorFaultsTest, AKillStormCostsSecondsAndNeverEndsTheJob) {
  Job job({});
  ASSERT_TRUE(wait_for([&] { return job.metric("env_steps") > 0; })) << slurp(job.err);
  std::set<pid_t> killed;  // a killed actor not yet reaped is listed (and killed) again
  for (int tick = 0; tick < 100; ++tick) {
    for (pid_t actor : children_of(job.pid)) {
      if (kill(actor, SIGKILL) == 0) killed.insert(actor);
    }
    std::this_thread::sleep_for(200ms);
  }
  const double kills = static_cast<double>(killed.size());
  EXPECT_GE(kills, 80) << "a killed actor is back within the next tick";
  ASSERT_TRUE(job.running()) << slurp(job.err);
  const double committed = job.metric("unrolls_committed");
  const auto storm_end = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for([&] { return job.metric("unrolls_committed") > committed + 4; }, 10s))
      << "training resumes within seconds of the storm:\n"
      << slurp(job.err);
  std::cerr << "training resumed "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - storm_end).count()
            << " s after the storm\n";
  EXPECT_TRUE(job.running());
  EXPECT_TRUE(wait_for([&] { return job.metric("actor_restarts") >= kills; }, 5s))
      << job.metric("actor_restarts") << " restarts after " << kills << " kills";
}

// One CPU this process may run on, for `taskset -c`: a job pinned there
// holds 2 actors whatever the machine.
std::string one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return "taskset -c " + std::to_string(cpu);
  }
  return "";
}

TEST(ActorCountTest, ACountOverTwoPerCoreIsRefusedAtStartUnlessOversubscribed) {
  {
    Job job({"--set", "actor.count=3"}, one_cpu());
    ASSERT_TRUE(job.ended(30s)) << slurp(job.err);
    EXPECT_EQ(job.status, 2);
    EXPECT_TRUE(std::regex_match(
        job.last_line(),
        std::regex("pronghorn: actor.count = 3: this node holds at most 2 actors \\(1 core × 2 per "
                   "core; memory: .* free holds [0-9]+ more at about .* each\\); set "
                   "actor.oversubscribe = true to start them anyway")))
        << slurp(job.err);
    EXPECT_FALSE(std::filesystem::exists(job.dir)) << "a job that never started leaves no run";
    job.expect_nothing_left();
  }
  Job job({"--set", "actor.count=3", "--set", "actor.oversubscribe=true"}, one_cpu());
  EXPECT_TRUE(wait_for([&] { return children_of(job.pid).size() == 3; })) << slurp(job.err);
  EXPECT_TRUE(wait_for([&] { return job.metric("env_steps") > 0; })) << slurp(job.err);
}

TEST(ActorCountTest, AScaleOverTheCapIsRefusedWithExit2AndDoneWithOversubscribe) {
  Job job({}, one_cpu());
  ASSERT_TRUE(wait_for([&] { return job.metric("env_steps") > 0; })) << slurp(job.err);
  const std::string scale = std::string(PRONGHORN_BIN) + " scale --run-dir " + job.dir;
  const auto [code, out] = shell(scale + " --actors 500");
  EXPECT_EQ(code, 2) << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("pronghorn: scale: --actors 500: this node holds at most 2 actors \\(1 core "
                      "× 2 per core; .*\\); pass --oversubscribe \\(or set actor.oversubscribe = "
                      "true\\) to start them anyway\n$")))
      << out;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(children_of(job.pid).size(), 1u) << "a refused scale changes nothing";
  const auto [forced, forced_out] = shell(scale + " --actors 3 --oversubscribe");
  EXPECT_EQ(forced, 0) << forced_out;
  EXPECT_EQ(forced_out.rfind("actors: 1 → 3 (run ", 0), 0u) << forced_out;
  EXPECT_TRUE(wait_for([&] { return children_of(job.pid).size() == 3; })) << slurp(job.err);
  EXPECT_TRUE(job.running());
}

}  // namespace
