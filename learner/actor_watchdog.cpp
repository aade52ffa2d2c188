#include "learner/actor_watchdog.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pronghorn::learner {
namespace {

double seconds(ActorWatchdog::Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

ActorWatchdog::ActorWatchdog(Limits limits, Clock::time_point now)
    : limits_(limits), progress_at_(now), observed_at_(now) {}

void ActorWatchdog::observe(uint64_t committed, int desired, Clock::time_point now) {
  const bool progress = committed != committed_;
  // The learner's loop itself was away longer than half the timeout (a long
  // step, a slow checkpoint): actors may only have been waiting for room in
  // the ring, so the clock starts again rather than blame them.
  const bool loop_was_away = limits_.stall_timeout > Clock::duration::zero() &&
                             now - observed_at_ > limits_.stall_timeout / 2;
  if (progress) {
    committed_ = committed;
    crashes_ = 0;
    last_death_.clear();
    starting_ = false;
  }
  if (desired == 0 && desired_ > 0) starting_ = true;  // the next ones load LibTorch again
  if (progress || desired == 0 || loop_was_away) progress_at_ = now;
  desired_ = desired;
  observed_at_ = now;
}

void ActorWatchdog::died(const std::string& what, bool crash) {
  last_death_ = what;
  if (crash) ++crashes_;
}

void ActorWatchdog::check(Clock::time_point now) const {
  if (limits_.max_crashes > 0 && crashes_ >= limits_.max_crashes) {
    throw Error(fmt::format(
        "actors keep crashing: {} in a row with no unroll committed; last: {} (actor.max_crashes "
        "= {})",
        crashes_, last_death_, limits_.max_crashes));
  }
  if (limits_.stall_timeout <= Clock::duration::zero() || desired_ == 0) return;
  const Clock::duration allowed =
      limits_.stall_timeout + (starting_ ? kStartAllowance : Clock::duration::zero());
  if (now - progress_at_ <= allowed) return;
  const std::string last =
      last_death_.empty()
          ? std::string("every actor is alive: an env step or the policy never returns?")
          : fmt::format("last: {}", last_death_);
  throw Error(
      fmt::format("actors stalled: no unroll committed for {:.0f} s with {} actor{} wanted{}; {} "
                  "(actor.stall_timeout_s = {})",
                  seconds(now - progress_at_), desired_, desired_ == 1 ? "" : "s",
                  starting_ ? " (since they started)" : "", last, seconds(limits_.stall_timeout)));
}

}  // namespace pronghorn::learner
