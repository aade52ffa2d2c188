// Learning curves a person can open: an SVG with the mean episode return
// against env steps and against wall time, the evaluation return beside the
// training return when the run evaluates, and the target as a dashed line;
// rewritten (atomically) at every report into the run directory as curves.svg.
// CurveHistory rebuilds the points from metrics.jsonl, so the picture of a
// resumed run starts where the run began.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pronghorn::learner {

struct CurvePoint {
  double env_steps = 0;
  double seconds = 0;  // wall time of the run, summed over its learners' lives
  double return_mean = 0;
};

struct Curves {
  std::vector<CurvePoint> train;  // mean return of the last 100 training episodes
  std::vector<CurvePoint> eval;   // mean return of each evaluation
  double target = 0;              // run.target_return; 0 = none
};

// Axis ticks at multiples of 1, 2 or 5 × 10^k covering [lo, hi], about
// `count` of them, each the decimal it prints as (no 0.30000000000000004).
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

// A tick's label on an axis of ticks `step` apart: "-1500", "0.25", "1.5M", "50k".
std::string tick_label(double value, double step);

void write_curves_svg(const std::string& path, const std::string& title, const Curves& curves);

// The curves' points, from metrics.jsonl lines (proto/status_json.h): the
// training return where a line has finished episodes, an evaluation point
// where eval_return_mean is present and a new evaluation came in.
class CurveHistory {
 public:
  // Reads every line of `path` (a missing file reads as none).
  void add_file(const std::string& path);
  void add_line(std::string_view json_line);
  const Curves& curves() const { return curves_; }

 private:
  Curves curves_;
  double offset_s_ = 0, last_uptime_s_ = 0;  // a learner's uptime restarts at a resume
  double last_eval_[3] = {0, 0, 0};          // mean, episodes, env steps of the last evaluation
};

}  // namespace pronghorn::learner
