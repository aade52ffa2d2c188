// The learner's reports (docs/architecture.md §4): every
// run.report_interval_s (sooner while the run is young: a tenth of its age,
// at least kFirstReportS), also while no batch comes, the rates over the
// interval and the health line are measured, and the status the loop builds
// is written (learner/reporting.h: metrics.jsonl, TensorBoard, curves, the
// progress line). Holds what a status says of the run itself: its identity,
// uptime, state and how it ended.
// Threads: one (the learner's loop).
#pragma once

#include <chrono>
#include <string>

#include "learner/actor_fleet.h"
#include "learner/job_health.h"
#include "learner/learner.h"
#include "learner/reporting.h"
#include "learner/run_stats.h"
#include "learner/run_status.h"

namespace pronghorn::learner {

// The shortest time between two reports of a young run.
inline constexpr double kFirstReportS = 0.1;

class RunReports {
 public:
  using Clock = std::chrono::steady_clock;

  RunReports(const TrainOptions& options, RunStats& stats);

  // The rates count from here (after any resume).
  void start(Clock::time_point now);
  bool due(Clock::time_point now) const;
  // The rates over the interval since the last report, and the health line.
  void measure(Clock::time_point now, const ActorFleet& fleet);
  // Writes the report of `status` (built after measure(now)).
  void write(const v1::Status& status, Clock::time_point now);
  // How the run ended: "finished" or "failed", and why.
  void end(std::string state, std::string reason);

  // The run's name, folder, env, config digest, uptime, state and health.
  void describe(LiveState& live) const;
  double elapsed() const;

 private:
  const TrainOptions& o_;
  RunStats& stats_;
  const std::string run_dir_absolute_, config_digest_;
  const Clock::time_point start_ = Clock::now();
  Reporter reporter_;
  Clock::time_point last_report_;
  uint64_t steps_at_report_ = 0, learner_steps_at_report_ = 0, local_steps_at_report_ = 0;
  JobHealth health_;
  std::string health_line_;                     // as of the last report
  std::string state_ = "running", end_reason_;  // Status.state, .end_reason
};

}  // namespace pronghorn::learner
