// Ends a job whose actors cannot make progress, so it never restarts them
// forever while reporting "running" (the job either trains or ends with one
// clear line, exit 1):
//   - crashes: `max_crashes` actor crashes in a row (a non-zero exit, or a
//     signal the actor raised itself) with no unroll committed in between;
//   - a stall: no unroll committed for `stall_timeout` while at least one
//     actor is wanted (an env step that never returns; actors killed from
//     outside over and over). Before the first unroll, and after actors are
//     wanted again having been scaled to 0, the actors are still loading
//     LibTorch: that wait gets kStartAllowance on top;
//   - a crash rate: over the last `crash_window`, at least kMinCrashesForRate
//     crashes and more than `max_crash_rate` crashes per committed unroll (an
//     env that fails every 50 steps lets each actor life commit an unroll, so
//     it never makes a streak, and would otherwise restart actors forever).
// Deaths from outside (SIGKILL, SIGTERM) are no crash: a kill storm is not a
// broken env. A learner with no actor wanted is waiting, not stalled.
// Bookkeeping only, on the times the caller passes, so tests need no sleep.
// Threads: one caller (the supervisor, on the learner's loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>

#include "core/config.h"

namespace pronghorn::fleet {

class ActorWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    int64_t max_crashes = 5;                                   // 0 = never end on crashes
    Clock::duration stall_timeout = std::chrono::seconds(60);  // 0 = never end on a stall
    double max_crash_rate = 0;  // crashes per committed unroll; 0 = never end on the rate
    Clock::duration crash_window = std::chrono::seconds(60);
  };
  // The rate is judged only on this many crashes in the window: a job whose
  // actors crashed once or twice early on is not ended by a ratio of 2 to 1.
  static constexpr int64_t kMinCrashesForRate = 5;
  // Time the first unroll may take beyond stall_timeout: actors load LibTorch
  // first, slowly when many start on few cores.
  static constexpr Clock::duration kStartAllowance = std::chrono::seconds(60);

  ActorWatchdog(Limits limits, Clock::time_point now);

  // Once per poll: the ring's committed-unroll counter and the actors wanted.
  void observe(uint64_t committed, int desired, Clock::time_point now);
  // An actor died: `what` says which and how ("actor 2 killed by SIGSEGV");
  // `crash` when it failed by itself, false when it was killed from outside
  // (then it is only named if a stall ends the job).
  void died(const std::string& what, bool crash);
  // Throws pronghorn::Error naming the reason and the last death when the
  // job must end.
  void check(Clock::time_point now) const;
  // While crashes build towards the rate limit (over half of it, with at
  // least one crash in the window): a line saying so, for the job's health;
  // "" otherwise.
  std::string crash_rate_warning(Clock::time_point now) const;

  int64_t crashes_in_a_row() const { return crashes_; }

 private:
  Limits limits_;
  uint64_t committed_ = 0;
  int desired_ = 0;
  bool starting_ = true;  // no unroll since the actors were (re)wanted
  Clock::time_point progress_at_, observed_at_;
  int64_t crashes_ = 0;     // since the last unroll
  std::string last_death_;  // since the last unroll
  // The crash rate's window: the totals as of each observe(), one sample a
  // second at most, none older than crash_window.
  struct Sample {
    Clock::time_point at;
    uint64_t committed = 0, crashes = 0;
  };
  struct Window {
    uint64_t crashes = 0, unrolls = 0;
    double seconds = 0;
  };
  Window window(Clock::time_point now) const;
  std::deque<Sample> samples_;
  uint64_t crashes_total_ = 0;
  std::string last_crash_;  // kept across unrolls: the rate's line names it
};

// The limits actor.max_crashes, stall_timeout_s, max_crash_rate and
// crash_window_s set; `stall` false: no stall limit (an actor-only node cut
// off from its learner commits nothing for as long as that lasts).
ActorWatchdog::Limits watchdog_limits(const ActorConfig& config, bool stall = true);

}  // namespace pronghorn::fleet
