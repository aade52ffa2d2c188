#include "fleet/actor_watchdog.h"

#include <fmt/format.h>

#include "core/clock.h"
#include "core/error.h"

namespace pronghorn::fleet {

ActorWatchdog::ActorWatchdog(Limits limits, Clock::time_point now)
    : limits_(limits), progress_at_(now), observed_at_(now), samples_{{now, 0, 0}} {}

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
  if (now - samples_.back().at >= std::chrono::seconds(1)) {
    samples_.push_back({now, committed_, crashes_total_});
  }
  // The window starts at its oldest sample (the newest one always stays).
  while (samples_.size() > 1 && now - samples_.front().at > limits_.crash_window) {
    samples_.pop_front();
  }
}

ActorWatchdog::Window ActorWatchdog::window(Clock::time_point now) const {
  const Sample& start = samples_.front();
  return {crashes_total_ - start.crashes, committed_ - start.committed, seconds(now - start.at)};
}

void ActorWatchdog::died(const std::string& what, bool crash) {
  last_death_ = what;
  if (crash) {
    ++crashes_;
    ++crashes_total_;
    last_crash_ = what;
  }
}

void ActorWatchdog::check(Clock::time_point now) const {
  if (limits_.max_crashes > 0 && crashes_ >= limits_.max_crashes) {
    throw Error(fmt::format(
        "actors keep crashing: {} in a row with no unroll committed; last: {} (actor.max_crashes "
        "= {})",
        crashes_, last_death_, limits_.max_crashes));
  }
  if (limits_.max_crash_rate > 0) {
    const Window w = window(now);
    if (static_cast<int64_t>(w.crashes) >= kMinCrashesForRate &&
        static_cast<double>(w.crashes) > limits_.max_crash_rate * static_cast<double>(w.unrolls)) {
      throw Error(fmt::format(
          "actors crash too often: {} crashes against {} unrolls committed in the last {:.0f} s; "
          "last: {} (actor.max_crash_rate = {:g} per unroll)",
          w.crashes, w.unrolls, w.seconds, last_crash_, limits_.max_crash_rate));
    }
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

ActorWatchdog::Limits watchdog_limits(const ActorConfig& config, bool stall) {
  return {.max_crashes = config.max_crashes,
          .stall_timeout = stall ? as_duration(config.stall_timeout_s) : as_duration(0),
          .max_crash_rate = config.max_crash_rate,
          .crash_window = as_duration(config.crash_window_s)};
}

std::string ActorWatchdog::crash_rate_warning(Clock::time_point now) const {
  if (limits_.max_crash_rate <= 0) return "";
  const Window w = window(now);
  if (w.crashes == 0 || static_cast<double>(w.crashes) <=
                            0.5 * limits_.max_crash_rate * static_cast<double>(w.unrolls)) {
    return "";
  }
  return fmt::format(
      "actors crashing: {} crashes against {} unrolls in the last {:.0f} s (the job ends past {:g} "
      "per unroll, actor.max_crash_rate)",
      w.crashes, w.unrolls, w.seconds, limits_.max_crash_rate);
}

}  // namespace pronghorn::fleet
