// Helpers for tests that run `pronghorn` as real processes: start one, find
// its children and its shared-memory segments, poll a condition. Link
// pronghorn_buffer.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "buffer/segment_names.h"
#include "core/testing/spawn.h"

namespace pronghorn::testing {

// `pronghorn --log-level warn <args…>` started in the background.
inline pid_t start_pronghorn(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--log-level", "warn"};
  all.insert(all.end(), args.begin(), args.end());
  return spawn(PRONGHORN_BIN, all);
}

// Stops a started process when the test leaves its scope, by any path: a
// failed ASSERT must not leave a job running (ctest would wait for the pipe
// it holds until its timeout).
struct StopOnExit {
  pid_t pid;
  ~StopOnExit() {
    if (pid > 0 && kill(pid, SIGTERM) == 0) wait_exit(pid);
  }
};

// Every child of `pid`, its zygote included.
inline std::vector<pid_t> all_children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  pid_t child;
  while (in >> child) out.push_back(child);
  return out;
}

// Whether `pid` is a learner's zygote (fleet/zygote.h), by the command line it shows.
inline bool is_zygote(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string text(17, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  for (char& c : text) c = c == '\0' ? ' ' : c;
  return text == "pronghorn zygote ";
}

// The children of `pid` but its zygote: a learner's actors.
inline std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out = all_children_of(pid);
  std::erase_if(out, is_zygote);
  return out;
}

// The zygote `pronghorn train` `pid` forks its actors from, or -1.
inline pid_t zygote_of(pid_t pid) {
  for (pid_t child : all_children_of(pid)) {
    if (is_zygote(child)) return child;
  }
  return -1;
}

// The run's shared-memory segments still in /dev/shm, of any learner of it,
// live or dead: names that parse (buffer/segment_names.h) with exactly this
// run (names under 200 characters are never cut short).
inline std::vector<std::string> leftover_segments(const std::string& run_name) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename();
    const auto fields = buffer::parse_segment_name(name);
    if (fields && fields->run == run_name) found.push_back(name);
  }
  return found;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every file of `run`/checkpoints, name → bytes (none without the folder).
inline std::map<std::string, std::string> checkpoint_files(const std::string& run) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run + "/checkpoints", ec)) {
    files[entry.path().filename().string()] = slurp(entry.path().string());
  }
  return files;
}

// Two runs wrote checkpoints of the same names, each the same bytes.
inline void expect_same_checkpoints(const std::map<std::string, std::string>& a,
                                    const std::map<std::string, std::string>& b) {
  ASSERT_FALSE(a.empty());
  std::vector<std::string> names_a, names_b;
  for (const auto& [name, bytes] : a) names_a.push_back(name);
  for (const auto& [name, bytes] : b) names_b.push_back(name);
  ASSERT_EQ(names_a, names_b);
  for (const auto& [name, bytes] : a) {
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs between the runs";
  }
}

// Runs a shell command; its exit code and its stdout and stderr together.
// `text` split at newlines.
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::pair<int, std::string> shell(const std::string& command) {
  const std::string out = ::testing::TempDir() + "/job-test-" + std::to_string(getpid()) + ".out";
  const int status = std::system((command + " >" + out + " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out)};
}

// The run name and directory of a `pronghorn train` a test starts: named
// after the test and this process, in the temporary directory (removed when
// the test passes: core/testing/test_main.cpp).
struct TrainRun {
  std::string name = "train-test-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string dir = ::testing::TempDir() + "/" + name;
};

// The arguments of a job on any free ports with one actor, trained until the
// test stops it, in run directory `dir` named `name`.
inline std::vector<std::string> job_args(const std::string& dir, const std::string& name) {
  return {"train",
          "--run-dir",
          dir,
          "--set",
          "run.name=" + name,
          "--set",
          "run.target_return=0",
          "--set",
          "run.total_steps=1000000000",
          "--set",
          "run.checkpoint_interval_s=0",
          "--set",
          "actor.count=1",
          "--set",
          "server.address=127.0.0.1:0",
          "--set",
          "server.metrics_port=0"};
}

// The value of "key" in the last line of `dir`/metrics.jsonl, or -1.
inline double last_metric(const std::string& dir, const std::string& key) {
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const size_t at = last.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stod(last.substr(at + key.size() + 4));
}

// Polls `ready` every 100 ms for up to `timeout`; its last answer.
inline bool wait_for(const std::function<bool()>& ready,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

// Waits up to `timeout` for child `pid` to end; whether it did. Then `pid`
// is -1 and `status` its exit status, or 128 + signal.
inline bool ended_within(pid_t& pid, int& status, std::chrono::milliseconds timeout) {
  int s = 0;
  if (!wait_for([&] { return waitpid(pid, &s, WNOHANG) == pid; }, timeout)) return false;
  status = WIFEXITED(s) ? WEXITSTATUS(s) : 128 + WTERMSIG(s);
  pid = -1;
  return true;
}

// The last line of the file at `path`, after any progress line ended by '\r'.
inline std::string last_line_of(const std::string& path) {
  std::string text = slurp(path);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.find_last_of("\r\n") + 1);
}

}  // namespace pronghorn::testing
