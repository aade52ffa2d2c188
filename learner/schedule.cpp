#include "learner/schedule.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "learner/checkpoint.h"

namespace pronghorn::learner {
namespace {

// How soon a periodic checkpoint that failed (a full disk) is tried again.
constexpr double kCheckpointRetryS = 10;

// run.deterministic: learner steps between evaluations started because the
// training mean is at the target. Each holds training until it reports, so
// one after every step while no evaluation confirms the target would slow
// training down several times over (CartPole: an evaluation takes about as
// long as 10 steps).
constexpr uint64_t kTargetEvalSpacingSteps = 10;

}  // namespace

Schedule::Schedule(const Config& config, const EnvSpec& spec, const std::string& run_dir, int rank,
                   PolicyTraining& policy, RunStats& stats)
    : c_(config),
      rank_(rank),
      policy_(policy),
      stats_(stats),
      config_path_(run_dir + "/config.toml"),
      checkpoints_(run_dir + "/checkpoints"),
      target_(config.run.target_return.value_or(spec.target_return)) {}

void Schedule::start(Clock::time_point now) {
  next_checkpoint_ = now + as_duration(c_.run.checkpoint_interval_s);
  next_eval_ = now + as_duration(c_.run.eval_interval_s);
  next_checkpoint_steps_ = next_multiple(c_.run.checkpoint_interval_steps);
  next_eval_steps_ = next_multiple(c_.run.eval_interval_steps);
  if (rank_ == 0) evaluator_.emplace(c_, config_path_, checkpoints_);
}

uint64_t Schedule::next_multiple(int64_t interval) const {
  if (interval <= 0) return 0;
  const auto n = static_cast<uint64_t>(interval);
  return (stats_.env_steps / n + 1) * n;
}

std::string Schedule::checkpoint() {
  stats_.last_checkpoint = save_checkpoint(
      checkpoints_, policy_.snapshot(stats_.env_steps, stats_.learner_steps, stats_.episodes),
      static_cast<int>(c_.run.keep_checkpoints));
  stats_.last_checkpoint_unix_s = unix_seconds();
  return stats_.last_checkpoint;
}

void Schedule::checkpoint_if_due(Clock::time_point now) {
  if (rank_ != 0) return;
  const bool by_steps = c_.run.checkpoint_interval_steps > 0;
  if (by_steps) {
    if (stats_.env_steps < next_checkpoint_steps_) return;
    next_checkpoint_steps_ = next_multiple(c_.run.checkpoint_interval_steps);
  } else {
    if (c_.run.deterministic || c_.run.checkpoint_interval_s <= 0 || now < next_checkpoint_) return;
    next_checkpoint_ = now + as_duration(c_.run.checkpoint_interval_s);
  }
  try {
    checkpoint();
  } catch (const Error& e) {  // a full disk: training goes on, the checkpoint is retried
    if (by_steps) {
      spdlog::error("{}; training goes on, next try at {} env steps", e.what(),
                    next_checkpoint_steps_);
      return;
    }
    const double retry = std::min(c_.run.checkpoint_interval_s, kCheckpointRetryS);
    spdlog::error("{}; training goes on, next try in {:.0f} s", e.what(), retry);
    next_checkpoint_ = now + as_duration(retry);
  }
}

// The evaluator copies the state and runs it in an evaluation process:
// training goes on meanwhile.
void Schedule::evaluate(Clock::time_point now) {
  if (!evaluator_) return;
  const bool at_target = training_at_target();
  std::optional<EvalReport> done = evaluator_->take();
  if (done && !done->skipped.empty()) {
    spdlog::error("evaluation skipped: {}; training goes on", done->skipped);
  } else if (done) {
    const actor::Evaluation& e = done->result;
    stats_.eval_return_mean = e.mean;
    stats_.eval_return_std = e.std;
    stats_.eval_episodes = e.returns.size();
    stats_.eval_env_steps = done->env_steps;
    if (done->new_best) {
      spdlog::info(
          "evaluation at {} env steps: return {:.2f} ± {:.2f} over {} episodes, the best "
          "so far: {}/{}",
          done->env_steps, e.mean, e.std, e.returns.size(), checkpoints_, kBestCheckpointName);
    }
    if (!done->best_error.empty()) {
      spdlog::error("best checkpoint not written: {}; training goes on", done->best_error);
    }
    // Solved: the evaluation reached the target, and so does the training
    // mean still (a run's figures then agree on it).
    eval_reached_target_ = at_target && e.mean >= target_;  // the newest evaluation decides
  }
  const bool due = eval_due(now);
  bool for_target = at_target;
  if (c_.run.deterministic) {  // once per learner step, and for the target not after every one
    if (evaluated_at_step_ == stats_.learner_steps) return;
    for_target =
        at_target && (!evaluated_at_step_ ||
                      stats_.learner_steps >= *evaluated_at_step_ + kTargetEvalSpacingSteps);
  }
  if ((for_target || due) && !evaluator_->busy() &&
      evaluator_->start(
          policy_.snapshot(stats_.env_steps, stats_.learner_steps, stats_.episodes))) {
    next_eval_ = now + as_duration(c_.run.eval_interval_s);
    next_eval_steps_ = next_multiple(c_.run.eval_interval_steps);
    evaluated_at_step_ = stats_.learner_steps;
  }
}

bool Schedule::eval_due(Clock::time_point now) const {
  if (c_.run.eval_interval_steps > 0) return stats_.env_steps >= next_eval_steps_;
  return !c_.run.deterministic && c_.run.eval_interval_s > 0 && now >= next_eval_;
}

}  // namespace pronghorn::learner
