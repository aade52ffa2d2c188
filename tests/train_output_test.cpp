// What `pronghorn train` writes for a reader: plain progress lines without a
// terminal and whole lines on one, a result and an eval hint that agree with
// train.log and metrics.jsonl, curves of a whole resumed run, and a reader
// that goes away (`| head`) does not kill the job.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;

// `pronghorn train 2>&1 | head -c 1`: the reader goes away after one byte.
// The job must not die of SIGPIPE: it finishes, writes its checkpoint and
// removes its shared memory.
// The points of the training curve in curves.svg's first panel; -1 when
// there is no curve.
int training_points(const std::string& svg) {
  std::smatch train;
  if (!std::regex_search(svg, train, std::regex(R"re(class="train"[^>]*points="([^"]*)")re")))
    return -1;
  const std::string xy = train[1];
  return static_cast<int>(std::count(xy.begin(), xy.end(), ','));
}

TEST(TrainOutputTest, AReaderThatGoesAwayDoesNotKillTheJob) {
  TrainRun run;
  const auto [code, out] = shell(
      "bash -c '" + std::string(PRONGHORN_BIN) + " train --run-dir " + run.dir +
      " --set run.name=" + run.name +
      " --set server.address=127.0.0.1:0 --set server.metrics_port=0 --set run.total_steps=300000"
      " --set run.report_interval_s=0.05 2>&1 | head -c 1 >/dev/null; echo rc=${PIPESTATUS[0]}'");
  EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::is_empty(run.dir + "/checkpoints"));
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// A progress line: "   1.2 s  12288 / 100000 steps (12.3%, ETA 8s)  9876 SPS  12 episodes
// return 21.5 / target 10000".
const std::regex kProgress(
    R"(^ *\d+\.\d s  \d+ / \d+ steps \(\d+\.\d%, ETA [^)]+\)  \d+ SPS  \d+ episodes  return (-|-?\d+\.\d)( / target \d+)?$)");
// A log line: "2026-11-23 20:40:01.123 pronghorn[4121] info: …".
const std::regex kLogLine(R"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [a-z0-9]+\[\d+\] \w+: .*)");

// Without a terminal (a pipe, a file, Slurm) the progress is plain lines,
// no \r; every line is whole: a log line, a progress line, the result, the
// eval hint. The run directory is named before training; train.log keeps
// the result; the hint's command works. A resume's curves.svg has the
// whole run: a point per metrics line with episodes, from both learners.
TEST(TrainOutputTest, ProgressWithoutATerminalIsPlainLinesAndCurvesKeepTheWholeRun) {
  TrainRun run;
  const std::string base = std::string(PRONGHORN_BIN) +
                           " train --set server.address=127.0.0.1:0 --set server.metrics_port=0"
                           " --set run.report_interval_s=0.1 --set run.checkpoint_interval_s=0";
  auto [code, out] = shell(base + " --run-dir " + run.dir + " --set run.name=" + run.name +
                           " --set run.target_return=10000 --set run.total_steps=1000000");
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  int progress = 0;
  std::string result, hint;
  bool named_before_training = false;
  for (const std::string& line : lines_of(out)) {
    if (std::regex_match(line, kProgress)) {
      ++progress;
      EXPECT_NE(line.find(" / 1000000 steps ("), std::string::npos) << line;
      EXPECT_NE(line.find(" / target 10000"), std::string::npos) << line;
    } else if (std::regex_match(line, kLogLine)) {
      if (progress == 0 && line.find(" in " + run.dir + ": ") != std::string::npos) {
        named_before_training = true;
      }
    } else if (line.rfind("stopped after ", 0) == 0) {
      result = line;
    } else if (line.rfind("evaluate it: ", 0) == 0) {
      hint = line;
    } else {
      ADD_FAILURE() << "a line that is none of log, progress, result, hint: [" << line << "]\n"
                    << out;
    }
  }
  EXPECT_GE(progress, 3) << out;
  EXPECT_TRUE(named_before_training) << out;
  ASSERT_FALSE(result.empty()) << out;
  EXPECT_NE(slurp(run.dir + "/train.log").find("info: " + result), std::string::npos)
      << "train.log keeps the result line";
  ASSERT_EQ(hint, "evaluate it: pronghorn eval " + run.dir);
  const std::string command = hint.substr(std::string("evaluate it: pronghorn").size());
  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + command + " --episodes 4");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("return mean "), std::string::npos) << out;

  std::tie(code, out) = shell(base + " --resume " + run.dir + " --set run.total_steps=2000000");
  ASSERT_EQ(code, 0) << out;
  int points = 0;
  double first_steps = -1;
  for (const std::string& line : lines_of(slurp(run.dir + "/metrics.jsonl"))) {
    if (line.find("\"episode_return_count\": 0,") != std::string::npos) continue;
    if (first_steps < 0) first_steps = std::stod(line.substr(line.find("\"env_steps\": ") + 13));
    ++points;
  }
  const std::string svg = slurp(run.dir + "/curves.svg");
  EXPECT_EQ(training_points(svg), points) << "both learners' points\n" << svg;
  EXPECT_LT(first_steps, 1000000) << "the first learner's points are among them";
  EXPECT_NE(svg.find(R"(class="target")"), std::string::npos);
  EXPECT_NE(svg.find(">env steps<"), std::string::npos);
  EXPECT_NE(svg.find(">mean episode return<"), std::string::npos);

  // A job that fails leaves its error line in train.log too.
  for (const auto& e : std::filesystem::directory_iterator(run.dir + "/checkpoints")) {
    std::ofstream(e.path()) << "not a checkpoint";
  }
  std::tie(code, out) = shell(base + " --resume " + run.dir + " --set run.total_steps=3000000");
  ASSERT_EQ(code, 1) << out;
  const std::vector<std::string> err = lines_of(out), log = lines_of(slurp(run.dir + "/train.log"));
  ASSERT_EQ(err.back().rfind("pronghorn: ", 0), 0u) << out;
  EXPECT_NE(log.back().find(" error: " + err.back().substr(11)), std::string::npos) << log.back();
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// On a terminal the progress line is rewritten in place; a log line while it
// is shown (here: scaling the actors) clears it first, so no line of the
// terminal holds both.
TEST(TrainOutputTest, OnATerminalLogLinesNeverGlueOntoTheProgressLine) {
  TrainRun run;
  const std::string typescript = ::testing::TempDir() + "/" + run.name + ".typescript";
  const std::string command = std::string(PRONGHORN_BIN) + " train --run-dir " + run.dir +
                              " --set run.name=" + run.name +
                              " --set server.address=127.0.0.1:0 --set server.metrics_port=0"
                              " --set run.report_interval_s=0.05 --set run.target_return=0"
                              " --set run.total_steps=1000000000 --set actor.count=1";
  // script(1) gives the job a pseudo-terminal and records what it shows.
  pid_t pid = spawn(
      "/bin/sh", {"-c", "exec script -q -f -e -c '" + command + "' " + typescript + " >/dev/null"});
  StopOnExit guard{pid};
  ASSERT_TRUE(wait_for([&] { return last_metric(run.dir, "env_steps") > 0; }));
  for (int actors : {2, 1, 2}) {
    auto [code, out] = shell(std::string(PRONGHORN_BIN) + " scale --run-dir " + run.dir +
                             " --actors " + std::to_string(actors));
    EXPECT_EQ(code, 0) << out;
    std::this_thread::sleep_for(300ms);
  }
  auto [code, out] = shell(std::string(PRONGHORN_BIN) + " stop --run-dir " + run.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(wait_exit(pid), 0);
  guard.pid = -1;
  const std::string screen = slurp(typescript);
  // What one terminal line shows: the text between two \r or \n; an erase
  // to the end of the line (\x1b[K) starts it afresh.
  int progress = 0, logs = 0, scaled = 0;
  std::string piece;
  auto check = [&] {
    // A progress line ends with an erase, a log line after one starts with it.
    std::string shown = piece;
    if (shown.size() >= 3 && shown.compare(shown.size() - 3, 3, "\x1b[K") == 0) {
      shown.resize(shown.size() - 3);
    }
    if (shown.rfind("\x1b[K", 0) == 0) shown.erase(0, 3);
    const bool is_progress = shown.find(" SPS ") != std::string::npos;
    const bool is_log = std::regex_search(shown, std::regex(R"(\d\d:\d\d:\d\d\.\d{3} )"));
    EXPECT_FALSE(is_progress && is_log) << "glued: [" << shown << "]";
    progress += is_progress;
    logs += is_log;
    scaled += is_log && shown.find("actors scaled from") != std::string::npos;
    piece.clear();
  };
  for (char c : screen) {
    if (c == '\r' || c == '\n') {
      check();
    } else {
      piece += c;
    }
  }
  check();
  EXPECT_GE(progress, 5) << screen;
  EXPECT_GE(scaled, 3) << screen;
  EXPECT_GE(logs, 5) << screen;
  EXPECT_TRUE(leftover_segments(run.name).empty());
}

// Plots a person reads: a run of a few seconds at the default report
// interval draws a curve of at least 10 training points (reports come
// sooner while a run is young), and each evaluation is a marker of its own.
TEST(TrainOutputTest, AFewSecondsOfTrainingDrawACurveWithAMarkerPerEvaluation) {
  TrainRun run;
  std::vector<std::string> args = job_args(run.dir, run.name);
  args.insert(args.end(), {"--set", "run.eval_interval_s=1", "--set", "run.eval_episodes=2"});
  pid_t pid = start_pronghorn(args);
  StopOnExit stop{pid};
  // Stopped as on Ctrl-C once it has trained 3.2 s (however long it took to start).
  ASSERT_TRUE(
      wait_for([&] { return last_metric(run.dir, "uptime_s") >= 3.2; }, std::chrono::seconds(60)));
  kill(pid, SIGINT);
  ASSERT_EQ(wait_exit(pid), 0);
  stop.pid = -1;
  int train_points = 0;
  double uptime = 0;
  std::set<std::string> evaluations;
  for (const std::string& line : lines_of(slurp(run.dir + "/metrics.jsonl"))) {
    uptime = std::stod(line.substr(line.find("\"uptime_s\": ") + 12));
    if (line.find("\"episode_return_count\": 0,") == std::string::npos) ++train_points;
    std::smatch m;
    if (std::regex_search(line, m,
                          std::regex(R"("eval_episodes": [1-9]\d*, "eval_env_steps": (\d+))")))
      evaluations.insert(m[1]);
  }
  EXPECT_GE(uptime, 3.0);
  EXPECT_GE(train_points, 10);
  ASSERT_GE(evaluations.size(), 1u);
  const std::string svg = slurp(run.dir + "/curves.svg");
  EXPECT_GE(training_points(svg), 10) << svg;
  size_t markers = 0;
  for (size_t at = svg.find("class=\"eval-point\""); at != std::string::npos;
       at = svg.find("class=\"eval-point\"", at + 1))
    ++markers;
  EXPECT_EQ(markers, 2 * evaluations.size()) << "one per evaluation in each panel\n" << svg;
}

}  // namespace
