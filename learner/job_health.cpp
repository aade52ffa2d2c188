#include "learner/job_health.h"

#include <fmt/format.h>

namespace pronghorn::learner {

std::string JobHealth::observe(double now_s, uint64_t env_steps, uint64_t actor_restarts,
                               int actors_desired) {
  if (!started_) {  // the first report is the baseline
    started_ = true;
    steps_ = env_steps;
    restarts_ = actor_restarts;
    steps_changed_s_ = now_s;
    return "";
  }
  for (uint64_t r = restarts_; r < actor_restarts; ++r) restart_times_.push_back(now_s);
  restarts_ = actor_restarts;
  while (!restart_times_.empty() && restart_times_.front() < now_s - limits_.restart_window_s) {
    restart_times_.pop_front();
  }
  if (env_steps != steps_ || actors_desired == 0) {
    steps_ = env_steps;
    steps_changed_s_ = now_s;
    unchanged_reports_ = 0;
  } else {
    ++unchanged_reports_;
  }
  std::string line;
  if (restart_times_.size() >= limits_.restarts) {
    line = fmt::format("actors keep dying: {} restarts in the last {:.0f} s (train.log has why)",
                       restart_times_.size(), limits_.restart_window_s);
  }
  const double stalled_s = now_s - steps_changed_s_;
  if (unchanged_reports_ >= limits_.stalled_reports && stalled_s >= limits_.stalled_min_s) {
    if (!line.empty()) line += "; ";
    line += fmt::format("env steps have not moved for {:.0f} s ({} reports) at {}", stalled_s,
                        unchanged_reports_, env_steps);
  }
  return line;
}

}  // namespace pronghorn::learner
