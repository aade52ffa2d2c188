#include "learner/reporting.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

#include "proto/status_json.h"

namespace pronghorn::learner {
namespace {

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Reporter::Reporter(std::string run_dir, std::string title)
    : run_dir_(std::move(run_dir)),
      title_(std::move(title)),
      metrics_(run_dir_ + "/metrics.jsonl", std::ios::app),
      tensorboard_(run_dir_ + "/tb", unix_now_s()) {}

void Reporter::report(const v1::Status& status, const RunStats& stats, double elapsed_s) {
  if (!(metrics_ << status_json(status) << "\n" << std::flush)) {
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
  if (!tensorboard_.write(step, unix_now_s(), status_scalars(status))) {
    if (!tensorboard_lost_) {
      spdlog::error("TensorBoard: {}; events are lost until it can", tensorboard_.error());
    }
    tensorboard_lost_ = true;
  } else {
    tensorboard_lost_ = false;
  }
  if (!stats.recent.empty()) {
    curve_.push_back({static_cast<double>(stats.env_steps), elapsed_s, stats.return_mean()});
    write_curves_svg(run_dir_ + "/curves.svg", title_, curve_);
  }
  std::fprintf(stderr, "\r%8.1fs  %10llu steps  %7.0f SPS  %6llu episodes  return %7.1f   ",
               elapsed_s, static_cast<unsigned long long>(stats.env_steps), stats.sps,
               static_cast<unsigned long long>(stats.episodes), stats.return_mean());
}

}  // namespace pronghorn::learner
