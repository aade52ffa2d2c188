// Python-hosted envs in real `pronghorn train` jobs: Gymnasium's CartPole-v1
// solved through env workers on 5 seeds; what a user can name wrong is exit 2
// at start; an env that raises, hangs or loses its worker ends or goes on as
// a crashing actor does. Every case checks that nothing is left behind: this
// test process is the child subreaper, so a worker orphaned by the job would
// become its child.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "envs/testing/python_envs.h"
#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
using pronghorn::envs::testing::test_python;

// A job of this test: its name, run directory, stderr file; ended by its
// owner or at scope exit. `args` follow `pronghorn --log-level warn`.
// "Suite.Case/Param" → "python-env-PID-Case-Param": a valid run.name.
std::string run_name() {
  std::string name = "python-env-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(name.begin(), name.end(), '/', '-');
  return name;
}

struct PythonJob {
  std::string name = run_name();
  std::string dir = ::testing::TempDir() + "/" + name;
  std::string err = dir + ".out";  // its stdout and stderr
  pid_t pid = -1;
  int status = -1;

  PythonJob() {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    setenv("PYTHONPATH", PRONGHORN_SOURCE_DIR "/envs/testing/python", 1);
  }
  ~PythonJob() {
    if (pid > 0 && kill(pid, SIGTERM) == 0) wait_exit(pid);
  }
  void start(const std::vector<std::string>& args) {
    std::string command = std::string("exec ") + PRONGHORN_BIN + " --log-level warn";
    for (const std::string& a : args) command += " '" + a + "'";
    pid = spawn("/bin/sh", {"-c", command + " >" + err + " 2>&1"});
  }
  // A job trained until the test stops it, on env `env_name`, then `extra`.
  void start_training(const std::string& env_name, const std::string& python,
                      std::vector<std::string> extra) {
    std::vector<std::string> args = job_args(dir, name);
    args.insert(args.end(), {"--set", "env.name=" + env_name, "--set", "env.python=" + python,
                             "--set", "env.num_envs=4", "--set", "run.report_interval_s=0.2"});
    args.insert(args.end(), extra.begin(), extra.end());
    start(args);
  }
  bool ended(std::chrono::milliseconds timeout) { return ended_within(pid, status, timeout); }
  std::string last_line() const { return last_line_of(err); }
  // Once the job ended: no process of it is left (reaped here if orphaned),
  // nor a segment.
  void expect_nothing_left() {
    auto none_left = [] {
      while (waitpid(-1, nullptr, WNOHANG) > 0) {  // orphans that ended since
      }
      return all_children_of(getpid()).empty();
    };
    EXPECT_TRUE(wait_for(none_left, 5s))
        << "a process of the job outlived it: "
        << slurp("/proc/" + std::to_string(all_children_of(getpid()).front()) + "/cmdline");
    EXPECT_TRUE(leftover_segments(name).empty());
  }
};

// The job's env workers: descendants of `root` running the worker.
std::vector<pid_t> workers_under(pid_t root) {
  std::vector<pid_t> found, frontier = {root};
  while (!frontier.empty()) {
    const pid_t p = frontier.back();
    frontier.pop_back();
    for (pid_t child : all_children_of(p)) {
      std::string cmdline = slurp("/proc/" + std::to_string(child) + "/cmdline");
      if (cmdline.find("pronghorn_worker.py") != std::string::npos) found.push_back(child);
      frontier.push_back(child);
    }
  }
  return found;
}

class GymCartPoleTest : public ::testing::TestWithParam<int> {};

TEST_P(GymCartPoleTest, ThePresetSolvesOnEvaluation) {
  PythonJob job;
  const std::string python = test_python();
  job.start({"train", "-c", PRONGHORN_SOURCE_DIR "/configs/gym_cartpole.toml", "--run-dir", job.dir,
             "--set", "run.name=" + job.name, "--set", "env.python=" + python, "--set",
             "run.seed=" + std::to_string(GetParam()), "--set", "server.address=127.0.0.1:0",
             "--set", "server.metrics_port=0"});
  ASSERT_TRUE(job.ended(150s)) << slurp(job.err);
  EXPECT_EQ(job.status, 0) << slurp(job.err);
  const std::string err = slurp(job.err);
  std::smatch solved;
  ASSERT_TRUE(std::regex_search(err, solved,
                                std::regex("solved: mean return ([0-9.]+) ≥ 475 on evaluation")))
      << err;
  EXPECT_GE(std::stod(solved[1]), 475.0);
  job.expect_nothing_left();
}

INSTANTIATE_TEST_SUITE_P(Seeds, GymCartPoleTest, ::testing::Values(1, 2, 3, 4, 5));

// env.splits = 2 (double buffering): the actor acts for one half of its
// envs while its two workers step the other; the preset still solves, and
// its one actor has two workers, each holding its share of both halves.
TEST(PythonEnvJobTest, ThePresetSolvesInTwoSplits) {
  PythonJob job;
  job.start({"train", "-c", PRONGHORN_SOURCE_DIR "/configs/gym_cartpole.toml", "--run-dir", job.dir,
             "--set", "run.name=" + job.name, "--set", "env.python=" + test_python(), "--set",
             "env.splits=2", "--set", "env.workers=2", "--set", "actor.count=1", "--set",
             "server.address=127.0.0.1:0", "--set", "server.metrics_port=0"});
  EXPECT_TRUE(wait_for([&] { return workers_under(job.pid).size() == 2; }, 60s));
  ASSERT_TRUE(job.ended(150s)) << slurp(job.err);
  EXPECT_EQ(job.status, 0) << slurp(job.err);
  EXPECT_TRUE(std::regex_search(slurp(job.err), std::regex("solved: mean return [0-9.]+ ≥ 475 "
                                                           "on evaluation")))
      << slurp(job.err);
  job.expect_nothing_left();
}

// `eval --video` of a Gymnasium env records the env's own pictures
// (render_mode "rgb_array"), 600 × 400 frames through the worker: ffprobe
// counts one per env step of the episodes --episodes-out lists.
TEST(PythonEnvJobTest, EvalVideoRecordsTheFramesTheEnvDraws) {
  PythonJob job;
  const std::string python = test_python();
  job.start({"train", "-c", PRONGHORN_SOURCE_DIR "/configs/gym_cartpole.toml", "--run-dir", job.dir,
             "--set", "run.name=" + job.name, "--set", "env.python=" + python, "--set",
             "run.total_steps=20000", "--set", "server.address=127.0.0.1:0", "--set",
             "server.metrics_port=0"});
  ASSERT_TRUE(job.ended(120s)) << slurp(job.err);
  ASSERT_EQ(job.status, 0) << slurp(job.err);
  const std::string video = job.dir + "/play.mp4", episodes = job.dir + "/episodes.jsonl";
  const auto [code, out] = shell(std::string(PRONGHORN_BIN) + " eval " + job.dir +
                                 " --episodes 2 --video " + video + " --episodes-out " + episodes);
  ASSERT_EQ(code, 0) << out;
  int64_t steps = 0;
  for (const std::string& line : lines_of(slurp(episodes))) {
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex(R"("length": (\d+)\})"))) << line;
    steps += std::stoll(m[1]);
  }
  EXPECT_GT(steps, 0);
  const auto [probed, probe] = shell(
      "ffprobe -v error -count_frames -select_streams v:0 -show_entries "
      "stream=nb_read_frames,width,height -of default=nw=1 " +
      video);
  ASSERT_EQ(probed, 0) << probe;
  EXPECT_NE(probe.find("width=600\nheight=400\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("nb_read_frames=" + std::to_string(steps) + "\n"), std::string::npos)
      << probe << "\nsteps: " << steps;
  job.expect_nothing_left();
}

struct StartFault {
  const char* id;
  std::string env_name;
  std::vector<std::string> extra;
  std::string says;
};

std::string start_fault_name(const ::testing::TestParamInfo<StartFault>& info) {
  return info.param.id;
}

class PythonStartFaultTest : public ::testing::TestWithParam<StartFault> {};

// One line naming what was wrong and the interpreter, exit 2, no run left.
TEST_P(PythonStartFaultTest, IsExitTwoWithOneLineAtStart) {
  const StartFault& fault = GetParam();
  PythonJob job;
  const std::string python = test_python();
  job.start_training(fault.env_name, python, fault.extra);
  ASSERT_TRUE(job.ended(60s)) << slurp(job.err);
  EXPECT_EQ(job.status, 2) << slurp(job.err);
  const std::string line = job.last_line();
  EXPECT_TRUE(
      line.starts_with("pronghorn: env " + fault.env_name + " (env.python = \"" + python + "\"): "))
      << line;
  EXPECT_NE(line.find(fault.says), std::string::npos) << line;
  EXPECT_FALSE(std::filesystem::exists(job.dir + "/checkpoints")) << "no run started";
  job.expect_nothing_left();
}

INSTANTIATE_TEST_SUITE_P(
    Faults, PythonStartFaultTest,
    ::testing::Values(StartFault{"MissingModule",
                                 "python:no_such_module_xyz:make_env",
                                 {},
                                 "cannot import no_such_module_xyz"},
                      StartFault{"WrongCallable",
                                 "python:pronghorn_test_envs:make_nothing",
                                 {},
                                 "pronghorn_test_envs has no callable make_nothing"},
                      StartFault{"BadOption",
                                 "gymnasium:CartPole-v1",
                                 {"--set", "env.options.no_such_option=3"},
                                 "unexpected keyword argument 'no_such_option'"},
                      StartFault{"UnsupportedSpace",
                                 "python:pronghorn_test_envs:make_dict_walk",
                                 {},
                                 "observation space Dict"}),
    start_fault_name);

TEST(PythonEnvJobTest, AnInterpreterOlderThan310IsExitTwoAtStart) {
  const auto [old, version] =
      pronghorn::envs::testing::other_python([](int minor) { return minor < 10; });
  if (old.empty()) {
    PRONGHORN_SKIP_UNLESS_CI(
        "no Python older than 3.10 on this machine (pythonX.Y on PATH or pyenv)");
  }
  PythonJob job;
  job.start_training("gymnasium:CartPole-v1", old, {});
  ASSERT_TRUE(job.ended(60s)) << slurp(job.err);
  EXPECT_EQ(job.status, 2);
  EXPECT_EQ(job.last_line(), "pronghorn: env gymnasium:CartPole-v1 (env.python = \"" + old +
                                 "\"): this is Python " + version +
                                 "; Python envs need 3.10 or newer");
  job.expect_nothing_left();
}

// Every actor life commits unrolls, then its env raises: the crash rate ends
// the job with the actor's line, which names the env and the exception.
TEST(PythonEnvJobTest, AnExceptionInStepEndsTheJobNamingIt) {
  PythonJob job;
  job.start_training("python:pronghorn_test_envs:make_walk", test_python(),
                     {"--set", "env.options.fail_at=40", "--set", "env.options.length=1000",
                      "--set", "actor.unroll_length=16"});
  ASSERT_TRUE(job.ended(90s)) << slurp(job.err);
  EXPECT_EQ(job.status, 1);
  EXPECT_TRUE(std::regex_match(
      job.last_line(),
      std::regex("pronghorn: actors crash too often: .*; last: actor 0 exited 1: env "
                 "python:pronghorn_test_envs:make_walk \\(env.python = \".*\"\\): step failed: "
                 "ValueError: the walk fell off its line at step 40 \\(actor.max_crash_rate .*")))
      << job.last_line();
  EXPECT_NE(slurp(job.err).find("Traceback (most recent call last)"), std::string::npos)
      << "the traceback is in the log";
  job.expect_nothing_left();
}

// The env hangs after its actor committed unrolls (before the first, the
// watchdog allows for a slow start).
TEST(PythonEnvJobTest, AStepThatNeverReturnsIsTheWatchdogsStall) {
  PythonJob job;
  job.start_training("python:pronghorn_test_envs:make_walk", test_python(),
                     {"--set", "env.options.hang_at=100", "--set", "env.options.length=1000",
                      "--set", "actor.unroll_length=16", "--set", "actor.stall_timeout_s=2"});
  ASSERT_TRUE(job.ended(60s)) << slurp(job.err);
  EXPECT_EQ(job.status, 1);
  EXPECT_TRUE(job.last_line().starts_with("pronghorn: actors stalled: no unroll committed for "))
      << job.last_line();
  job.expect_nothing_left();
}

// As an actor killed from outside: its line, a new actor, the job goes on.
TEST(PythonEnvJobTest, AWorkerKilledFromOutsideCostsOneActorLife) {
  PythonJob job;
  job.start_training("gymnasium:CartPole-v1", test_python(), {});
  ASSERT_TRUE(wait_for([&] { return last_metric(job.dir, "env_steps") > 0; }, 60s))
      << slurp(job.err);
  const std::vector<pid_t> workers = workers_under(job.pid);  // the start check's is gone
  ASSERT_EQ(workers.size(), 1u);
  ASSERT_EQ(kill(workers.front(), SIGKILL), 0);
  EXPECT_TRUE(wait_for(
      [&] { return slurp(job.err).find("was killed by SIGKILL during step") != std::string::npos; },
      30s))
      << slurp(job.err);
  EXPECT_TRUE(wait_for(
      [&] {
        const std::vector<pid_t> now = workers_under(job.pid);
        return !now.empty() && now.front() != workers.front();
      },
      30s))
      << "a new actor with a new worker";
  const double steps = last_metric(job.dir, "env_steps");
  EXPECT_TRUE(wait_for([&] { return last_metric(job.dir, "env_steps") > steps; }, 30s))
      << "training goes on";
  kill(job.pid, SIGTERM);
  ASSERT_TRUE(job.ended(30s));
  job.expect_nothing_left();
}

// env.episode_info reaches metrics.jsonl: the scored walk's "score" is 10 ×
// the steps of a won episode, at least 4 steps from a start in [-1, 1] to 5.
TEST(PythonEnvJobTest, EpisodeInfoIsLoggedBesideTheReturn) {
  PythonJob job;
  job.start_training("python:pronghorn_test_envs:make_scored_walk", test_python(),
                     {"--set", "env.episode_info=[\"score\", \"won\"]"});
  EXPECT_TRUE(wait_for([&] { return last_metric(job.dir, "score") > 0; }, 60s)) << slurp(job.err);
  EXPECT_GE(last_metric(job.dir, "score"), 40);
  const double won = last_metric(job.dir, "won");
  EXPECT_GT(won, 0);
  EXPECT_LE(won, 1);
  kill(job.pid, SIGTERM);
  ASSERT_TRUE(job.ended(30s));
  EXPECT_EQ(job.status, 0) << slurp(job.err);
  job.expect_nothing_left();
}

TEST(PythonEnvJobTest, ThePythonPresetsAreValidConfigs) {
  const std::string python = test_python();
  for (const char* preset : {"gym_cartpole", "lunarlander", "halfcheetah", "halfcheetah_appo",
                             "hopper", "walker2d", "ant", "atari", "atari_envpool"}) {
    const auto [code, out] =
        shell(std::string(PRONGHORN_BIN) + " config -c " + PRONGHORN_SOURCE_DIR + "/configs/" +
              preset + ".toml --set env.python=" + python);
    EXPECT_EQ(code, 0) << preset << ": " << out;
    EXPECT_TRUE(out.find("name = \"gymnasium:") != std::string::npos ||
                out.find("name = \"envpool:") != std::string::npos)
        << out;
  }
}

TEST(PythonEnvJobTest, EnvsShowsAPythonEnvsSpaces) {
  const std::string python = test_python();
  const auto [code, out] = shell(std::string(PRONGHORN_BIN) +
                                 " envs --python-env gymnasium:LunarLander-v3 --python " + python);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("gymnasium:LunarLander-v3 obs float32[8], 4 discrete actions, time limit "
                     "1000 (in " +
                     python),
            std::string::npos)
      << out;
  const auto [bad, says] = shell(std::string(PRONGHORN_BIN) +
                                 " envs --python-env gymnasium:NoSuchEnv-v0 --python " + python);
  EXPECT_EQ(bad, 2) << says;
  EXPECT_NE(says.find("pronghorn: env gymnasium:NoSuchEnv-v0"), std::string::npos) << says;
}

}  // namespace
