// Helpers for tests that run several `pronghorn train` ranks of one job as
// real processes on this machine: each rank's stdout and stderr in files, its
// own environment, reaped with a deadline and killed on every exit path; the
// lines a rank leaves in its train.log and the checkpoints of its run. Link
// pronghorn_testing_netns (for wait_exit_within).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/job.h"
#include "tests/testing/netns.h"

namespace pronghorn::testing {

// Variables from which a rank would take its placement (distributed/
// placement.h): never inherited, so the tests mean the same under a
// launcher (a Slurm allocation, a torchrun shell) as outside one.
inline bool is_placement_variable(const std::string& name) {
  static const char* const kNames[] = {
      "RANK",       "WORLD_SIZE",           "MASTER_ADDR",     "MASTER_PORT",
      "LOCAL_RANK", "JOB_COMPLETION_INDEX", "SLURMD_NODENAME", "PRONGHORN_TOKEN"};
  for (const char* n : kNames) {
    if (name == n) return true;
  }
  return name.rfind("SLURM_", 0) == 0;
}

// This process's environment less the placement variables, with `extra`
// ("NAME" → value) added.
inline std::vector<std::string> rank_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (!is_placement_variable(name) && extra.count(name) == 0) env.push_back(entry);
  }
  for (const auto& [name, value] : extra) {
    std::string entry = name;
    entry += '=';
    entry += value;
    env.push_back(std::move(entry));
  }
  return env;
}

// `binary args…` with environment `env`, stdout to `out_path` and stderr to
// `err_path` (truncated); -1 when it cannot start.
inline pid_t spawn_logged(const std::string& binary, const std::vector<std::string>& args,
                          const std::vector<std::string>& env, const std::string& out_path,
                          const std::string& err_path) {
  std::vector<std::string> all = {binary};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = env;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = -1;
  const int failed = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return failed != 0 ? -1 : pid;
}

// The last non-empty line of `text`.
inline std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const size_t start = text.rfind('\n');
  return start == std::string::npos ? text : text.substr(start + 1);
}

// One running rank: its pid and output files. The destructor resumes a
// stopped rank, SIGTERMs it and, after 10 s, SIGKILLs it, and reaps it:
// a failed ASSERT leaves nothing running.
class RankProcess {
 public:
  RankProcess() = default;
  RankProcess(pid_t pid, std::string out, std::string err)
      : pid_(pid), out_(std::move(out)), err_(std::move(err)) {}
  RankProcess(RankProcess&& other) noexcept { *this = std::move(other); }
  RankProcess& operator=(RankProcess&& other) noexcept {
    stop();
    pid_ = other.pid_;
    out_ = std::move(other.out_);
    err_ = std::move(other.err_);
    status_ = other.status_;
    other.pid_ = -1;
    return *this;
  }
  ~RankProcess() { stop(); }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  std::string stdout_text() const { return slurp(out_); }
  std::string stderr_text() const { return slurp(err_); }
  // Both, for failure messages.
  std::string output() const {
    return "--- stdout:\n" + stdout_text() + "\n--- stderr (last 3000 bytes):\n" +
           tail(stderr_text(), 3000);
  }

  // The last line on stderr: the one a failed rank ends with ("pronghorn: …").
  std::string last_error_line() const { return last_line(stderr_text()); }

  // The exit status (128 + signal) once it exits within `timeout`; nothing
  // while it runs on. Asking again after it exited gives the same status.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return status_;
    status_ = wait_exit_within(pid_, timeout);
    if (status_) pid_ = -1;
    return status_;
  }

  void signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

  static std::string tail(const std::string& text, size_t n) {
    return text.size() <= n ? text : text.substr(text.size() - n);
  }

 private:
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGTERM);
    if (!wait_exit_within(pid_, std::chrono::seconds(10))) {
      kill(pid_, SIGKILL);
      wait_exit_within(pid_, std::chrono::seconds(10));
    }
    pid_ = -1;
  }

  pid_t pid_ = -1;
  std::string out_, err_;
  std::optional<int> status_;
};

// A rank of `pronghorn --log-level info <args…>` (info, so that train.log
// holds the checksum line), output in `<files>.out` / `<files>.err`.
inline RankProcess start_rank(const std::vector<std::string>& args, const std::string& files,
                              const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> all = {"--log-level", "info"};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid =
      spawn_logged(PRONGHORN_BIN, all, rank_environment(env), files + ".out", files + ".err");
  return RankProcess(pid, files + ".out", files + ".err");
}

// The first line of `path` once it exists and is complete (ends in a
// newline) within `timeout`, without the newline; "" otherwise.
inline std::string wait_for_line_file(const std::string& path, std::chrono::milliseconds timeout) {
  std::string line;
  wait_for(
      [&] {
        const std::string text = slurp(path);
        const size_t end = text.find('\n');
        if (end == std::string::npos) return false;
        line = text.substr(0, end);
        return true;
      },
      timeout);
  return line;
}

// The line every rank logs at its end (learner/learner.cpp).
struct ChecksumLine {
  int rank = -1;
  std::string checksum;  // 16 hex digits
  uint64_t learner_steps = 0;
  uint64_t policy_version = 0;
};

// The last checksum line in `train_log`, if any.
inline std::optional<ChecksumLine> checksum_line(const std::string& train_log) {
  static const std::regex kLine(
      R"(rank (\d+): parameter checksum ([0-9a-f]{16}) after (\d+) learner steps, policy version (\d+))");
  const std::string text = slurp(train_log);
  std::optional<ChecksumLine> last;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kLine);
       it != std::sregex_iterator(); ++it) {
    last =
        ChecksumLine{std::stoi((*it)[1]), (*it)[2], std::stoull((*it)[3]), std::stoull((*it)[4])};
  }
  return last;
}

// The last "resumed from PATH: E env steps, L learner steps, policy version
// V" line of rank 0's `train_log`.
struct ResumedLine {
  std::string path;
  uint64_t env_steps = 0, learner_steps = 0, policy_version = 0;
};
inline std::optional<ResumedLine> resumed_line(const std::string& train_log) {
  static const std::regex kLine(
      R"(resumed from (\S+): (\d+) env steps, (\d+) learner steps, policy version (\d+))");
  const std::string text = slurp(train_log);
  std::optional<ResumedLine> last;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kLine);
       it != std::sregex_iterator(); ++it) {
    last =
        ResumedLine{(*it)[1], std::stoull((*it)[2]), std::stoull((*it)[3]), std::stoull((*it)[4])};
  }
  return last;
}

// A TCP port on 127.0.0.1 free a moment ago (bound to port 0, then closed):
// for launchers' MASTER_PORT, which must be fixed before rank 0 starts.
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

// Whether process `pid` is gone (or a zombie about to be reaped by init).
inline bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return true;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || stat.substr(paren + 2, 1) == "Z";
}

// A prefix for this test's run names and files.
inline std::string test_tag() {
  return "ct" + std::to_string(getpid()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

inline std::string status_text(const std::optional<int>& status) {
  return status ? std::to_string(*status) : std::string("still running");
}

// Every rank's exit status, waiting for all within `timeout` from now.
inline std::vector<std::optional<int>> wait_all(std::vector<RankProcess>& ranks,
                                                std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::optional<int>> statuses;
  for (RankProcess& rank : ranks) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    statuses.push_back(rank.wait(std::max(left, std::chrono::milliseconds(1))));
  }
  return statuses;
}

// Whether every process in `pids` is gone within `timeout`.
inline bool all_gone(const std::vector<pid_t>& pids,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  return wait_for(
      [&] {
        return std::all_of(pids.begin(), pids.end(), [](pid_t p) { return process_gone(p); });
      },
      timeout);
}

inline std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += n + " ";
  return out;
}

// The newest checkpoint file of `run` and the env steps its name carries
// (checkpoints/env-steps-<20 digits>.ckpt); nothing when there is none.
inline std::optional<std::pair<std::string, uint64_t>> newest_checkpoint(const std::string& run) {
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

}  // namespace pronghorn::testing
