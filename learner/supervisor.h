// Starts and supervises this node's actor processes (DESIGN.md §2): each is
// this same binary executed as `pronghorn actor …` (posix_spawn, never a
// bare fork: LibTorch threads exist). A dead actor is restarted with
// exponential back-off (0.5 s doubling to 30 s; reset once it has run 60 s).
// scale() grows or shrinks the set while training goes on: a retired actor
// gets SIGTERM and abandons its half-written slot (never a committed one).
// Threads: one caller (the learner's loop).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pronghorn::learner {

class Supervisor {
 public:
  // `args(i)` are the arguments after the program name for actor i.
  Supervisor(std::vector<std::string> base_args, int count);
  ~Supervisor();  // stops every actor

  // Reaps dead actors and restarts those whose back-off has passed; reaps
  // retired ones (SIGKILL past their grace).
  void poll();
  // Keeps `count` actors from now on: starts the missing ones, or retires the
  // highest-numbered ones.
  void scale(int count);
  // SIGTERM to all, then SIGKILL to any still alive after `grace`.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(3));

  int alive() const;  // actor processes running, retiring ones included
  int desired() const { return static_cast<int>(actors_.size()); }
  uint64_t restarts() const { return restarts_; }

 private:
  struct Actor {
    pid_t pid = -1;
    std::chrono::steady_clock::time_point started, restart_at;
    std::chrono::milliseconds backoff{500};
  };
  struct Retiring {
    pid_t pid;
    std::chrono::steady_clock::time_point kill_at;  // SIGKILL if still alive then
  };
  void start(size_t index);

  std::vector<std::string> base_args_;
  std::vector<Actor> actors_;
  std::vector<Retiring> retiring_;
  uint64_t restarts_ = 0;
};

}  // namespace pronghorn::learner
