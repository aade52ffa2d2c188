#include "learner/supervisor.h"

#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/error.h"

extern char** environ;

namespace pronghorn::learner {

using Clock = std::chrono::steady_clock;

Supervisor::Supervisor(std::vector<std::string> base_args, int count)
    : base_args_(std::move(base_args)), actors_(static_cast<size_t>(count)) {
  for (size_t i = 0; i < actors_.size(); ++i) start(i);
}

Supervisor::~Supervisor() { stop(); }

void Supervisor::start(size_t index) {
  std::vector<std::string> args = {"pronghorn"};
  args.insert(args.end(), base_args_.begin(), base_args_.end());
  args.push_back("--actor-id");
  args.push_back(std::to_string(index));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
  PRONGHORN_CHECK(err == 0, "cannot start actor ", index, ": ", std::strerror(err));
  actors_[index].pid = pid;
  actors_[index].started = Clock::now();
}

void Supervisor::poll() {
  const auto now = Clock::now();
  std::erase_if(retiring_, [&](const Retiring& r) {
    if (waitpid(r.pid, nullptr, WNOHANG) == r.pid) return true;
    if (now < r.kill_at) return false;
    kill(r.pid, SIGKILL);
    waitpid(r.pid, nullptr, 0);
    return true;
  });
  for (size_t i = 0; i < actors_.size(); ++i) {
    Actor& a = actors_[i];
    if (a.pid > 0) {
      int status = 0;
      if (waitpid(a.pid, &status, WNOHANG) != a.pid) continue;
      spdlog::warn("actor {} (pid {}) {} {}; restarting in {} ms", i, a.pid,
                   WIFSIGNALED(status) ? "killed by signal" : "exited with",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), a.backoff.count());
      if (now - a.started > std::chrono::seconds(60)) a.backoff = std::chrono::milliseconds(500);
      a.pid = -1;
      a.restart_at = now + a.backoff;
      a.backoff = std::min(a.backoff * 2, std::chrono::milliseconds(30'000));
      continue;
    }
    if (now >= a.restart_at) {
      start(i);
      ++restarts_;
    }
  }
}

void Supervisor::scale(int count) {
  const size_t wanted = static_cast<size_t>(std::max(0, count));
  while (actors_.size() > wanted) {
    const pid_t pid = actors_.back().pid;
    if (pid > 0) {
      kill(pid, SIGTERM);
      retiring_.push_back({pid, Clock::now() + std::chrono::seconds(3)});
    }
    actors_.pop_back();
  }
  while (actors_.size() < wanted) {
    actors_.emplace_back();
    start(actors_.size() - 1);
  }
}

void Supervisor::stop(std::chrono::milliseconds grace) {
  std::vector<pid_t> running;
  for (Actor& a : actors_) {
    if (a.pid > 0) running.push_back(a.pid);
    a.pid = -1;
    a.restart_at = Clock::time_point::max();  // a poll() after stop() restarts nothing
  }
  for (const Retiring& r : retiring_) running.push_back(r.pid);
  retiring_.clear();
  for (pid_t pid : running) kill(pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  for (pid_t pid : running) {
    for (;;) {
      const pid_t reaped = waitpid(pid, nullptr, WNOHANG);
      if (reaped == pid || reaped < 0) break;
      if (Clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

int Supervisor::alive() const {
  int n = static_cast<int>(retiring_.size());
  for (const Actor& a : actors_) n += a.pid > 0;
  return n;
}

}  // namespace pronghorn::learner
