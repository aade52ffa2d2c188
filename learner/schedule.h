// What the learner's loop does on a clock besides stepping: checkpoints
// every run.checkpoint_interval_s (and on request, and at the end), and
// rank 0's evaluations (learner/evaluator.h) every run.eval_interval_s or at
// once while the training mean is at the target — which only an evaluation
// can confirm: the run is solved when both are at run.target_return.
// run.checkpoint_interval_steps and run.eval_interval_steps replace the
// clocks with env-step counts. Under run.deterministic only the step counts
// hold, and an evaluation holds training until it reports (holds_training),
// so that what it says lands between the same two learner steps every run.
// Threads: one (the learner's loop); the evaluator runs on its own.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/env_spec.h"
#include "learner/evaluator.h"
#include "learner/policy_training.h"
#include "learner/run_stats.h"

namespace pronghorn::learner {

class Schedule {
 public:
  using Clock = std::chrono::steady_clock;

  // Checkpoints go to `run_dir`/checkpoints; `rank` 0 evaluates and writes them.
  Schedule(const Config& config, const EnvSpec& spec, const std::string& run_dir, int rank,
           PolicyTraining& policy, RunStats& stats);

  // The clocks start (and rank 0's evaluator) when training does.
  void start(Clock::time_point now);
  // Rank 0, when due: a checkpoint. A failed one (a full disk) is logged and
  // tried again soon; training goes on.
  void checkpoint_if_due(Clock::time_point now);
  // Writes a checkpoint of the policy as last published; returns its path.
  // Throws Error when it cannot.
  std::string checkpoint();
  // Takes a finished evaluation; starts one when due.
  void evaluate(Clock::time_point now);
  // Whether the newest evaluation and the training mean are at the target.
  bool solved() const { return eval_reached_target_ && training_at_target(); }
  // solved(), and from now on only a new evaluation says solved again.
  bool recheck_solved() { return eval_reached_target_ = solved(); }
  // run.deterministic, while an evaluation runs: the loop takes no batch.
  bool holds_training() const { return c_.run.deterministic && evaluator_ && evaluator_->busy(); }
  // Waits up to `timeout` for the evaluation under way to finish.
  void wait_for_evaluation(std::chrono::milliseconds timeout) {
    if (evaluator_) evaluator_->wait(timeout);
  }
  // An evaluation under way is cancelled.
  void end() { evaluator_.reset(); }

  double target() const { return target_; }  // 0: none
  const std::string& checkpoints() const { return checkpoints_; }

 private:
  bool training_at_target() const {  // the mean of the last 100 training episodes
    return target_ != 0 && stats_.has_full_window() && stats_.return_mean() >= target_;
  }

  const Config& c_;
  const int rank_;
  PolicyTraining& policy_;
  RunStats& stats_;
  const std::string config_path_;  // the run's config.toml, for the evaluation process
  const std::string checkpoints_;
  // run.target_return resolved ("auto": the env's own); 0 = off.
  const double target_;
  // The first multiple of `interval` env steps above the run's env steps now.
  uint64_t next_multiple(int64_t interval) const;
  bool eval_due(Clock::time_point now) const;

  Clock::time_point next_checkpoint_, next_eval_;
  uint64_t next_checkpoint_steps_ = 0, next_eval_steps_ = 0;  // the step cadences'
  // run.deterministic: the learner step of the last evaluation started.
  std::optional<uint64_t> evaluated_at_step_;
  std::optional<Evaluator> evaluator_;  // rank 0's, from start()
  bool eval_reached_target_ = false;    // the newest evaluation reached the target
};

}  // namespace pronghorn::learner
