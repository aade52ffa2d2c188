// Where a learner's periodic report goes: one line of metrics.jsonl (the
// Status as JSON), its curves as one TensorBoard event in
// tb/events.out.tfevents.* (learner/tensorboard_writer.h) and each new
// evaluation as one more, at the step it was measured; the return curves
// in curves.svg (the whole run: a resumed run's earlier lines are read back),
// and the progress line on stderr (core/logging.h: in place on a terminal,
// a plain line per report elsewhere). A full disk loses lines, never the job.
// Threads: one (the learner's loop).
#pragma once

#include <fstream>
#include <string>

#include "learner/curves.h"
#include "learner/run_stats.h"
#include "learner/tensorboard_writer.h"
#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

// The progress line of `status`: progress toward total_steps with an ETA at
// `steps_per_s`, the return and the target.
//   12.3 s  1234567 / 20000000 steps (6.2%, ETA 3m05s)  98765 SPS  1234 episodes  return 45.6 / 475
std::string progress_line(const v1::Status& status, double elapsed_s, double steps_per_s);

class Reporter {
 public:
  // `title` heads the curves, e.g. "<run> on <env>".
  Reporter(std::string run_dir, std::string title);

  void report(const v1::Status& status, const RunStats& stats, double elapsed_s);

 private:
  const std::string run_dir_, title_;
  std::ofstream metrics_;
  bool metrics_lost_ = false;  // the last write failed
  TensorBoardWriter tensorboard_;
  bool tensorboard_lost_ = false;       // the last event could not be written
  uint64_t evaluation_written_at_ = 0;  // eval_env_steps of the last evaluation written
  CurveHistory curves_;
  // The ETA's rate: env steps since this learner's first report.
  bool have_first_ = false;
  double first_steps_ = 0, first_s_ = 0;
};

}  // namespace pronghorn::learner
