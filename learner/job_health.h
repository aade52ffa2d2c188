// A job's health line for `pronghorn status`, from what each report sees:
// actors that keep dying (restarts within the last minute) or env steps that
// stopped moving (no new step for several reports). A supervisor that gives
// up ends the job (actor.max_crashes); this says so before it does, and
// names a stall that ends nothing (a wedged env, every actor stalled).
// Threads: one (the learner's loop).
#pragma once

#include <cstdint>
#include <deque>
#include <string>

namespace pronghorn::learner {

struct HealthLimits {
  uint64_t restarts = 3;  // this many restarts within restart_window_s
  double restart_window_s = 60;
  int stalled_reports = 10;   // no env step for this many reports
  double stalled_min_s = 30;  // and for at least this long
};

class JobHealth {
 public:
  explicit JobHealth(HealthLimits limits = {}) : limits_(limits) {}

  // At a report: the time (seconds, any origin), the run's env steps, the
  // actor restarts so far, the actors wanted (0: acting paused, no stall).
  // Returns the health line, "" while all is well.
  std::string observe(double now_s, uint64_t env_steps, uint64_t actor_restarts,
                      int actors_desired);

 private:
  const HealthLimits limits_;
  bool started_ = false;
  uint64_t steps_ = 0, restarts_ = 0;
  double steps_changed_s_ = 0;
  int unchanged_reports_ = 0;
  std::deque<double> restart_times_;  // one entry per restart within the window
};

}  // namespace pronghorn::learner
