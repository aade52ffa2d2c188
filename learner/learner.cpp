#include "learner/learner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "buffer/segment_names.h"
#include "core/clock.h"
#include "core/logging.h"
#include "fleet/actor_capacity.h"
#include "learner/error_line.h"
#include "learner/learner_loop.h"
#include "learner/resume.h"
#include "model/tensor_runtime.h"

namespace pronghorn::learner {
namespace {

int rank_of(const TrainOptions& o) { return o.collective ? o.collective->rank() : 0; }

// This learner's shared memory (`kind`: the ring or the slab), named apart
// per rank.
std::string segment_name(const TrainOptions& o, std::string_view kind) {
  const int rank = rank_of(o);
  const std::string id =
      rank == 0 ? o.config.run.name : fmt::format("{}-rank{}", o.config.run.name, rank);
  return buffer::own_segment_name(kind, id);
}

// The threads the learner computes with: learner.threads, or for 0 what its
// help says, the cores this node's actors leave (cores − actors ×
// actor.threads), at least one. "auto" actors are one per core but one, the
// learner's (fleet/actor_capacity.h). Logged with the reason.
int compute_threads(const Config& c) {
  if (c.learner.threads > 0) {
    const int n = static_cast<int>(c.learner.threads);
    spdlog::debug("learner: {} compute thread{} (learner.threads)", n, n == 1 ? "" : "s");
    return n;
  }
  const int cores = fleet::measure_machine_room().cores;
  const int64_t actors =
      c.actor.count ? static_cast<int64_t>(*c.actor.count) : std::max(1, cores - 1);  // "auto"
  const int64_t taken = actors * c.actor.threads;
  const int n = static_cast<int>(std::max<int64_t>(1, cores - taken));
  spdlog::debug(
      "learner: {} compute thread{} (learner.threads = 0: {} core{} less {} actor{} × {})", n,
      n == 1 ? "" : "s", cores, cores == 1 ? "" : "s", actors, actors == 1 ? "" : "s",
      c.actor.threads);
  return n;
}

}  // namespace

Learner::Loop::Loop(const TrainOptions& o, ControlBoard& board, const std::atomic<bool>& stop)
    : o_(o),
      policy_(o_.config, o_.env),
      fleet_(o_, segment_name(o_, buffer::kRingSegment)),
      schedule_(o_.config, o_.env, o_.run_dir, rank_of(o_), policy_, stats_),
      reports_(o_, stats_),
      control_(board, stop, rank_of(o_)) {
  stats_.episode_info_keys = o_.env.episode_info;
  policy_.create_slab(segment_name(o_, buffer::kSlabSegment));  // after the fleet's ring
  if (o_.resume && rank_of(o_) == 0) resume();
  step_ = make_learner_step(o_, policy_, fleet_, stats_, board);
  policy_.publish();
  control_.publish(status());
}

void Learner::Loop::resume() {
  const ResumePoint r =
      resume_from_checkpoints(schedule_.checkpoints(), policy_.trainer(), o_.config);
  const RunCounters& n = r.counters;
  stats_.env_steps = n.env_steps;
  stats_.learner_steps = n.learner_steps;
  stats_.episodes = n.episodes;
  policy_.set_version(n.policy_version);
  spdlog::info("resumed from {}: {} env steps, {} learner steps, policy version {}", r.path,
               n.env_steps, n.learner_steps, n.policy_version);
}

void Learner::Loop::start() {
  const Config& c = o_.config;
  fleet_.start(policy_.slab_name(), policy_.slab(), policy_.version(), rank_of(o_));
  spdlog::info(
      "training {} on {} in {}: {} actors × {} envs, unrolls of {}, batches of {}, learner on {}, "
      "a model of {} parameters",
      c.run.name, o_.env.name, o_.run_dir, fleet_.initial_actors(), c.env.num_envs,
      c.actor.unroll_length, c.learner.batch_size, policy_.trainer().device().str(),
      policy_.trainer().model()->parameter_count());
  if (c.run.deterministic && !policy_.trainer().device().is_cpu()) {
    spdlog::warn(
        "run.deterministic = true with the learner on {}: untested there (GPU kernels may reduce "
        "in another order each run); learner.device = \"cpu\" is the tested one",
        policy_.trainer().device().str());
  }
  const auto now = Clock::now();
  reports_.start(now);  // after any resume
  schedule_.start(now);
}

std::optional<PreparedBatch> Learner::Loop::wait_for_batch() {
  const auto start = Clock::now();
  std::optional<PreparedBatch> prepared = fleet_.next_batch(step_->batch_wait());
  stats_.stage_time.learner_wait_s += seconds_since(start);
  return prepared;
}

TrainResult Learner::Loop::run() {
  start();
  const auto status_now = [this] { return status(); };
  const auto solved_now = [this] { return schedule_.recheck_solved(); };
  bool finished = false;  // the target or the step budget reached
  for (;;) {
    // Actors that end once the job stops were stopped with it, by the signal
    // that stopped it (sent to the process group) or by the stop to come.
    if (control_.stopping()) fleet_.hold_restarts();
    // Throws when actors keep failing. A learner that holds training (an
    // evaluation, or a batch waiting for the other ranks') leaves its actors
    // nothing to do: that is no stall.
    fleet_.poll(schedule_.holds_training() || step_->holds_batch());
    control_.handle(fleet_, schedule_, status_now);
    if (control_.stopping() && step_->stops_alone()) break;
    control_.publish_if_due(status_now);
    schedule_.evaluate(Clock::now());  // takes a finished evaluation, starts a due one
    std::optional<PreparedBatch> prepared;
    if (schedule_.holds_training()) {
      schedule_.wait_for_evaluation(step_->batch_wait());
    } else if (!step_->holds_batch()) {
      prepared = wait_for_batch();
    }
    const StepOutcome step = step_->take(prepared, control_.votes(), solved_now);
    if (step.leave) {
      control_.stopped_by_vote(step.stop_now);
      break;
    }
    finished = step.trained && (step_->reached_target() || budget_spent());
    if (finished) break;
    const auto now = Clock::now();
    // A metrics line every run.report_interval_s, also while no batch
    // comes: a job waiting on its actors says so.
    if (reports_.due(now)) report(now);
    if (step.trained) schedule_.checkpoint_if_due(now);
  }
  return finish(finished);
}

// The batch prepared during the last step has left the ring (the step
// trains on it or counts it lost). Then the last report, the final
// checkpoint, the answers to stop requests, and the actors stopped.
TrainResult Learner::Loop::finish(bool finished) {
  step_->finish(fleet_.stop_taking(), finished);
  const bool reached = step_->reached_target();
  reports_.end("finished", reached                     ? "reached the target return"
                           : budget_spent()            ? "reached run.total_steps"
                           : control_.stop_requested() ? "stopped on request"
                                                       : "stopped by a signal");
  report(Clock::now());
  end_progress();  // the lines that follow start on their own
  std::string final_checkpoint;
  if (rank_of(o_) == 0 && control_.checkpoint_at_stop() &&
      (stats_.learner_steps > 0 || control_.stop_requested())) {
    final_checkpoint = schedule_.checkpoint();
    spdlog::info("checkpoint {}", final_checkpoint);
  }
  schedule_.end();             // an evaluation under way is cancelled
  control_.publish(status());  // with the final checkpoint: the last status a stream sends
  control_.close(final_checkpoint);
  fleet_.end();
  TrainResult result{.env_steps = stats_.env_steps,
                     .learner_steps = stats_.learner_steps,
                     .seconds = reports_.elapsed(),
                     .return_mean = stats_.return_mean(),
                     .eval_return_mean = stats_.eval_return_mean,
                     .eval_episodes = stats_.eval_episodes,
                     .reached_target = reached};
  step_->complete(result);
  return result;
}

// The last metrics line of a run that failed: state "failed" and the error,
// over the counters as they were. A second failure (the disk, say) while
// writing it is the first one's to report, not this line's.
void Learner::Loop::report_failure(const std::exception& error) noexcept {
  try {
    reports_.end("failed", reason_of(error));
    report(Clock::now());
  } catch (...) {
  }
}

// A metrics.jsonl line, the curves and the progress line.
void Learner::Loop::report(Clock::time_point now) {
  reports_.measure(now, fleet_);
  const v1::Status s = status();
  control_.publish(s);
  reports_.write(s, now);
}

v1::Status Learner::Loop::status() const {
  LiveState live;
  live.policy_version = policy_.version();
  live.stopping = control_.stopping();
  live.rank = static_cast<uint32_t>(rank_of(o_));
  live.node_name = o_.node_name;
  live.total_steps = static_cast<uint64_t>(o_.config.run.total_steps);
  live.target_return = schedule_.target();
  reports_.describe(live);
  fleet_.describe(live);
  step_->describe(live);
  if (live.state == "running" && live.stopping) live.state = "stopping";
  return make_status(stats_, live);
}

Learner::Learner(const TrainOptions& options, ControlBoard& board, const std::atomic<bool>& stop) {
  keep_freed_memory_in_heap();
  set_compute_threads(compute_threads(options.config));
  torch::manual_seed(options.config.run.seed);
  loop_ = std::make_unique<Loop>(options, board, stop);
}

Learner::~Learner() = default;

TrainResult Learner::run() {
  try {
    return loop_->run();
  } catch (const std::exception& e) {
    loop_->report_failure(e);
    end_progress();  // main's error line stands alone
    throw;
  }
}

}  // namespace pronghorn::learner
