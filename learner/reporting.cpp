#include "learner/reporting.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "core/clock.h"
#include "core/logging.h"
#include "proto/status_json.h"

namespace pronghorn::learner {
namespace {

// 42s, 3m05s, 2h07m, 3d04h.
std::string duration_text(double s) {
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t < 60) return fmt::format("{}s", t);
  if (t < 3600) return fmt::format("{}m{:02}s", t / 60, t % 60);
  if (t < 86400) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
  return fmt::format("{}d{:02}h", t / 86400, t % 86400 / 3600);
}

}  // namespace

std::string progress_line(const v1::Status& s, double elapsed_s, double steps_per_s) {
  std::string line = fmt::format("{:8.1f} s  {} ", elapsed_s, s.env_steps());
  if (s.total_steps() > 0) {
    const double left = static_cast<double>(s.total_steps()) - static_cast<double>(s.env_steps());
    line += fmt::format("/ {} steps ({:.1f}%, ETA {})", s.total_steps(),
                        100.0 * static_cast<double>(s.env_steps()) / s.total_steps(),
                        left <= 0         ? "0s"
                        : steps_per_s > 0 ? duration_text(left / steps_per_s)
                                          : std::string("?"));
  } else {
    line += "steps";
  }
  line += fmt::format("  {:.0f} SPS  {} episodes  return ", s.sps(), s.episodes());
  line += s.episode_return().count() > 0 ? fmt::format("{:.1f}", s.episode_return().mean())
                                         : std::string("-");
  if (s.target_return() != 0) line += fmt::format(" / target {:g}", s.target_return());
  return line;
}

Reporter::Reporter(std::string run_dir, std::string title)
    : run_dir_(std::move(run_dir)),
      title_(std::move(title)),
      metrics_(run_dir_ + "/metrics.jsonl", std::ios::app),
      tensorboard_(run_dir_ + "/tb", unix_seconds()) {
  curves_.add_file(run_dir_ + "/metrics.jsonl");  // a resumed run's: its curves go on
}

void Reporter::report(const v1::Status& status, const RunStats& stats, double elapsed_s) {
  const std::string line = status_json(status);
  if (!(metrics_ << line << "\n" << std::flush)) {
    // A full disk: this line is lost, the next is tried; said once per outage.
    if (!metrics_lost_) {
      spdlog::error("{}/metrics.jsonl: cannot write; lines are lost until it can", run_dir_);
    }
    metrics_lost_ = true;
    metrics_.clear();
  } else {
    metrics_lost_ = false;
  }
  // The x axis is env steps, as in curves.svg: comparable across runs and resumes.
  const auto step = static_cast<int64_t>(status.env_steps());
  if (!tensorboard_.write(step, unix_seconds(), status_scalars(status))) {
    if (!tensorboard_lost_) {
      spdlog::error("TensorBoard: {}; events are lost until it can", tensorboard_.error());
    }
    tensorboard_lost_ = true;
  } else {
    tensorboard_lost_ = false;
  }
  // An evaluation's point once, at the step it was measured.
  if (status.eval_env_steps() != evaluation_written_at_) {
    const std::vector<Scalar> evaluation = evaluation_scalars(status);
    const auto at = static_cast<int64_t>(status.eval_env_steps());
    if (!evaluation.empty() && tensorboard_.write(at, unix_seconds(), evaluation)) {
      evaluation_written_at_ = status.eval_env_steps();
    }
  }
  curves_.add_line(line);  // the picture has the points a lost line would have had
  if (!curves_.curves().train.empty() || !curves_.curves().eval.empty()) {
    write_curves_svg(run_dir_ + "/curves.svg", title_, curves_.curves());
  }
  const auto steps = static_cast<double>(stats.env_steps);
  if (!have_first_) {
    have_first_ = true;
    first_steps_ = steps;
    first_s_ = elapsed_s;
  }
  const double rate = elapsed_s > first_s_ && steps > first_steps_
                          ? (steps - first_steps_) / (elapsed_s - first_s_)
                          : stats.sps;
  show_progress(progress_line(status, elapsed_s, rate));
}

}  // namespace pronghorn::learner
