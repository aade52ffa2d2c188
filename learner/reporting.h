// Where a learner's periodic report goes: one line of metrics.jsonl (the
// Status as JSON), the same numbers as one TensorBoard event in
// tb/events.out.tfevents.* (learner/tensorboard_writer.h), the return curve in
// curves.svg, and the progress line on stderr. A full disk loses lines, never
// the job.
// Threads: one (the learner's loop).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "learner/curves.h"
#include "learner/run_stats.h"
#include "learner/tensorboard_writer.h"
#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

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
  bool tensorboard_lost_ = false;  // the last event could not be written
  std::vector<CurvePoint> curve_;
};

}  // namespace pronghorn::learner
