// Helpers for tests that run `pronghorn` as real processes: start one, find
// its children and its shared-memory segments, poll a condition. Link
// pronghorn_buffer.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
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

inline std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  pid_t child;
  while (in >> child) out.push_back(child);
  return out;
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

}  // namespace pronghorn::testing
