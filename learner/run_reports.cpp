#include "learner/run_reports.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include "core/clock.h"
#include "core/fnv.h"

namespace pronghorn::learner {

RunReports::RunReports(const TrainOptions& o, RunStats& stats)
    : o_(o),
      stats_(stats),
      run_dir_absolute_(std::filesystem::absolute(o.run_dir).string()),
      config_digest_(fmt::format("{:016x}", fnv1a(to_toml(o.config)))),
      reporter_(o.run_dir, o.config.run.name + " on " + o.env.name) {}

void RunReports::start(Clock::time_point now) {
  last_report_ = now;
  steps_at_report_ = stats_.env_steps;
  learner_steps_at_report_ = stats_.learner_steps;
}

bool RunReports::due(Clock::time_point now) const {
  // Short runs plot too: while the run is young a report comes every tenth
  // of its age (at least every 0.1 s), so a run of a few seconds has a
  // curve, not three points; from run.report_interval_s × 10 on, every
  // run.report_interval_s.
  const double young = std::max(kFirstReportS, seconds(now - start_) / 10);
  return seconds(now - last_report_) >= std::min(o_.config.run.report_interval_s, young);
}

void RunReports::measure(Clock::time_point now, const ActorFleet& fleet) {
  const double interval = std::max(1e-9, seconds(now - last_report_));
  stats_.sps = (stats_.env_steps - steps_at_report_) / interval;
  stats_.learner_steps_per_s = (stats_.learner_steps - learner_steps_at_report_) / interval;
  stats_.local_sps = (stats_.local_env_steps - local_steps_at_report_) / interval;
  local_steps_at_report_ = stats_.local_env_steps;
  last_report_ = now;
  steps_at_report_ = stats_.env_steps;
  learner_steps_at_report_ = stats_.learner_steps;
  std::string health =
      health_.observe(seconds(now - start_), stats_.env_steps, fleet.restarts(), fleet.desired());
  // Before actor.max_crash_rate ends the job, the health line says it builds.
  const std::string crash_rate = fleet.crash_rate_warning();
  if (!crash_rate.empty()) health = health.empty() ? crash_rate : health + "; " + crash_rate;
  if (!health.empty() && health != health_line_) spdlog::warn("health: {}", health);
  health_line_ = health;
}

void RunReports::write(const v1::Status& status, Clock::time_point now) {
  reporter_.report(status, stats_, seconds(now - start_));
}

void RunReports::end(std::string state, std::string reason) {
  state_ = std::move(state);
  end_reason_ = std::move(reason);
}

void RunReports::describe(LiveState& live) const {
  live.run_name = o_.config.run.name;
  live.run_dir = run_dir_absolute_;
  live.env_name = o_.env.name;
  live.config_digest = config_digest_;
  live.uptime_s = elapsed();
  live.state = state_;
  live.end_reason = end_reason_;
  live.health = health_line_;
}

double RunReports::elapsed() const { return seconds(Clock::now() - start_); }

}  // namespace pronghorn::learner
