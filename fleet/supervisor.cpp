#include "fleet/supervisor.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "fleet/actor_capacity.h"
#include "fleet/actor_command.h"
#include "fleet/child_process.h"

namespace pronghorn::fleet {

Supervisor::Supervisor(std::vector<std::string> base_args, int count, SupervisorOptions options)
    : base_args_(std::move(base_args)),
      options_(std::move(options)),
      actors_(static_cast<size_t>(std::max(0, count))),
      watchdog_(options_.limits, Clock::now()) {
  try {
    start_due(Clock::now());
  } catch (...) {  // no destructor runs for a half-made object: stop what started
    stop();
    throw;
  }
}

Supervisor::~Supervisor() { stop(); }

void Supervisor::start(size_t index) {
  std::vector<std::string> args = {"pronghorn"};
  args.insert(args.end(), base_args_.begin(), base_args_.end());
  args.push_back(kActorIdFlag);
  args.push_back(std::to_string(index));
  ActorOutput output;
  const pid_t pid = start_child(options_.program, args, output, fmt::format("actor {}", index));
  Actor& a = actors_[index];
  a.output = std::move(output);
  a.pid = pid;
  if (a.started_before) ++restarts_;
  a.started_before = true;
}

void Supervisor::start_due(Clock::time_point now) {
  if (stopped_) return;
  const auto until = Clock::now() + options_.start_budget;
  bool started = false;
  for (size_t i = 0; i < actors_.size(); ++i) {
    if (actors_[i].pid > 0 || actors_[i].start_at > now) continue;
    if (started && Clock::now() >= until) return;  // the rest at the next poll
    start(i);
    started = true;
  }
}

void Supervisor::reaped(size_t index, int status, Clock::time_point now) {
  Actor& a = actors_[index];
  a.output.finish();
  const ChildDeath death = death_of(status, a.output.last_line());
  if (restarts_held_) {
    spdlog::info("actor {} (pid {}) {} while the job stops", index, a.pid, death.how);
    a.pid = -1;
    a.start_at = Clock::time_point::max();
    return;
  }
  if (death.crash) {
    spdlog::warn("actor {} (pid {}) {}; restarting in {} ms", index, a.pid, death.how,
                 std::chrono::duration_cast<std::chrono::milliseconds>(a.backoff).count());
    a.start_at = now + a.backoff;
    a.backoff = std::min(a.backoff * 2, kMaxBackoff);
  } else {
    spdlog::warn("actor {} (pid {}) {}; restarting", index, a.pid, death.how);
    a.start_at = now;
  }
  a.pid = -1;
  watchdog_.died(fmt::format("actor {} {}", index, death.how), death.crash);
}

void Supervisor::poll(uint64_t committed, bool learner_waits) {
  const auto now = Clock::now();
  if (committed != committed_) {  // the actors work: a crash from now on waits little again
    committed_ = committed;
    for (Actor& a : actors_) a.backoff = kFirstBackoff;
  }
  watchdog_.observe(committed, learner_waits ? 0 : desired(), now);
  std::erase_if(retiring_, [&](Retiring& r) {
    r.output.drain();
    if (waitpid(r.pid, nullptr, WNOHANG) != r.pid) {
      if (now < r.kill_at) return false;
      kill(r.pid, SIGKILL);
      waitpid(r.pid, nullptr, 0);
    }
    r.output.finish();
    return true;
  });
  for (size_t i = 0; i < actors_.size(); ++i) {
    Actor& a = actors_[i];
    if (a.pid <= 0) continue;
    a.output.drain();
    int status = 0;
    if (waitpid(a.pid, &status, WNOHANG) == a.pid) reaped(i, status, now);
  }
  watchdog_.check(now);
  start_due(now);
}

uint64_t Supervisor::actor_bytes() const {
  uint64_t bytes = kActorBytesGuess;
  for (const Actor& a : actors_) {
    if (a.pid > 0) bytes = std::max(bytes, private_memory_bytes(a.pid));
  }
  return bytes;
}

void Supervisor::scale(int count, bool oversubscribe) {
  const size_t wanted = static_cast<size_t>(std::max(0, count));
  if (wanted > actors_.size() && !oversubscribe) {
    check_actor_room(count, actor_room(measure_machine_room(), alive(), actor_bytes()),
                     fmt::format("--actors {}", count),
                     "pass --oversubscribe (or set actor.oversubscribe = true) to start them "
                     "anyway");
  }
  while (actors_.size() > wanted) {
    Actor& a = actors_.back();
    if (a.pid > 0) {
      kill(a.pid, SIGTERM);
      retiring_.push_back({a.pid, std::move(a.output), Clock::now() + std::chrono::seconds(3)});
    }
    actors_.pop_back();
  }
  actors_.resize(wanted);  // new ones start over the next polls, the first now
  start_due(Clock::now());
}

void Supervisor::stop(std::chrono::milliseconds grace) {
  stopped_ = true;  // a poll() after stop() starts nothing
  std::vector<std::pair<pid_t, ActorOutput*>> running;
  for (Actor& a : actors_) {
    if (a.pid > 0) running.emplace_back(a.pid, &a.output);
    a.pid = -1;
  }
  for (Retiring& r : retiring_) running.emplace_back(r.pid, &r.output);
  for (const auto& [pid, output] : running) kill(pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  while (!running.empty()) {
    const bool late = Clock::now() > deadline;
    std::erase_if(running, [&](const std::pair<pid_t, ActorOutput*>& r) {
      r.second->drain();  // every pipe, every round: an actor blocked writing cannot exit
      pid_t reaped = waitpid(r.first, nullptr, WNOHANG);
      if (reaped == 0 && late) {
        kill(r.first, SIGKILL);
        reaped = waitpid(r.first, nullptr, 0);
      }
      if (reaped == 0) return false;
      r.second->finish();
      return true;
    });
    if (!running.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  retiring_.clear();
}

int Supervisor::alive() const {
  int n = static_cast<int>(retiring_.size());
  for (const Actor& a : actors_) n += a.pid > 0;
  return n;
}

}  // namespace pronghorn::fleet
