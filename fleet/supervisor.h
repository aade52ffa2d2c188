// Starts and supervises this node's actor processes (docs/architecture.md §2): each is
// this same binary run as `pronghorn actor-process …`, its stderr read
// through a pipe and passed on line by line (fleet/actor_output.h). Never a
// bare fork of this process (LibTorch threads exist): forked by the zygote
// `pronghorn train` made at the top of main (fleet/zygote.h: no exec, no
// second start-up of LibTorch), else executed afresh by posix_spawn.
//
// Restarts: an actor killed from outside (SIGKILL, SIGTERM, any signal it did
// not raise itself) is restarted at once: a kill storm is not a broken env
// and must not cost minutes of back-off. One that crashed (a non-zero exit;
// SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL) waits 0.5 s, doubling to 8 s;
// the waits start over as soon as an unroll is committed. ActorWatchdog ends
// the job when crashes or a stall go on (fleet/actor_watchdog.h).
//
// Starting is paced: posix_spawn (clone with CLONE_VFORK) returns only once
// the child has executed (the zygote, once it has forked twice), and on
// cores busy with actors loading LibTorch the child waits its turn longer
// the more of them there are (measured on 2 cores: 0.2 ms for the first
// spawns, 50-100 ms at the 35th to 40th; the whole loop grows with the
// square of the count, which is how `scale --actors 500` held the loop for
// 164 s). So each poll() starts actors for at most `start_budget` (at least
// one), and the learner's loop goes on training and answering between them.
//
// scale() grows or shrinks the set while training goes on: a retired actor
// gets SIGTERM and abandons its half-written slot (never a committed one).
// Threads: one caller (the learner's loop).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "fleet/actor_output.h"
#include "fleet/actor_watchdog.h"
#include "fleet/child_process.h"  // start_actors_through

namespace pronghorn::fleet {

struct SupervisorOptions {
  std::string program = "/proc/self/exe";  // what an actor executes (tests: /bin/sh)
  ActorWatchdog::Limits limits;
  // How long one poll() may spend starting actors; it starts one at least.
  std::chrono::steady_clock::duration start_budget = std::chrono::milliseconds(20);
};

class Supervisor {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::duration kFirstBackoff = std::chrono::milliseconds(500);
  static constexpr Clock::duration kMaxBackoff = std::chrono::seconds(8);

  // `base_args` are the arguments after the program name ("pronghorn");
  // each actor gets `--actor-id i` after them. Starts the first of `count`
  // actors at once, the rest over the next polls.
  Supervisor(std::vector<std::string> base_args, int count, SupervisorOptions options = {});
  ~Supervisor();  // stops every actor

  // Passes on the actors' output, reaps dead actors, restarts those whose
  // wait has passed, starts wanted ones (paced), and reaps retired ones
  // (SIGKILL past their grace). `committed` is the ring's committed-unroll
  // counter: progress for the watchdog, which throws pronghorn::Error from
  // here when the job must end. `learner_waits`: the learner takes no unrolls
  // for now (run.deterministic while an evaluation runs), so actors that
  // stop committing are not stalled.
  void poll(uint64_t committed, bool learner_waits = false);
  // Keeps `count` actors from now on: the missing ones start over the next
  // polls, or the highest-numbered ones are retired. Growing past what this
  // node holds (fleet/actor_capacity.h) throws UsageError, unless
  // `oversubscribe`.
  void scale(int count, bool oversubscribe);
  // The job is stopping: from now on an actor that ends is reaped and not
  // started again, nor counted as a death. A signal sent to the whole
  // process group (`timeout`, Slurm's scancel) stops
  // the actors as it stops the learner, and restarting them would only start
  // actors for stop() to end.
  void hold_restarts() { restarts_held_ = true; }
  // SIGTERM to all, then SIGKILL to any still alive after `grace`.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(3));

  int alive() const;  // actor processes running, retiring ones included
  int desired() const { return static_cast<int>(actors_.size()); }
  uint64_t restarts() const { return restarts_; }
  // The watchdog's line while crashes build towards actor.max_crash_rate; "" otherwise.
  std::string crash_rate_warning() const { return watchdog_.crash_rate_warning(Clock::now()); }

 private:
  struct Actor {
    pid_t pid = -1;  // -1: not running; starts once start_at has passed
    ActorOutput output;
    bool started_before = false;  // a start after the first is a restart
    Clock::time_point start_at{};
    Clock::duration backoff = kFirstBackoff;
  };
  struct Retiring {
    pid_t pid;
    ActorOutput output;
    Clock::time_point kill_at;  // SIGKILL if still alive then
  };
  void start(size_t index);
  void start_due(Clock::time_point now);
  void reaped(size_t index, int status, Clock::time_point now);
  uint64_t actor_bytes() const;

  const std::vector<std::string> base_args_;
  const SupervisorOptions options_;
  std::vector<Actor> actors_;
  std::vector<Retiring> retiring_;
  ActorWatchdog watchdog_;
  uint64_t committed_ = 0;
  uint64_t restarts_ = 0;
  bool stopped_ = false;
  bool restarts_held_ = false;  // hold_restarts()
};

}  // namespace pronghorn::fleet
