#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include "buffer/segment_names.h"
#include "core/error.h"
#include "core/fnv.h"
#include "core/logging.h"
#include "learner/actor_capacity.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"
#include "learner/error_line.h"
#include "learner/learner_loop.h"
#include "learner/resume.h"
#include "model/tensor_runtime.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;
using loop_time::as_duration;
using loop_time::seconds;

// How soon a periodic checkpoint that failed (a full disk) is tried again.
constexpr double kCheckpointRetryS = 10;

// Removes the shared memory of every learner that died without removing its
// own (SIGKILL), whatever its run: names carry the owner's pid and start time
// (buffer/segment_names.h), and a live learner's segments are never touched.
void remove_stale_segments() {
  const buffer::SegmentSweep sweep = buffer::remove_dead_segments();
  for (const buffer::Segment& s : sweep.removed) {
    spdlog::info("removed stale shared memory {} ({}) of dead learner {} of run {}", s.name,
                 buffer::format_bytes(s.bytes), s.fields.pid, s.fields.run);
  }
  for (const buffer::Segment& s : sweep.failed) {
    spdlog::warn("cannot remove stale shared memory {} of dead learner {}: {}", s.name,
                 s.fields.pid, s.error);
  }
}

}  // namespace

Learner::Loop::Loop(const TrainOptions& o, ControlBoard& board, const std::atomic<bool>& stop)
    : o_(o),
      c_(o_.config),
      board_(board),
      stop_(stop),
      T_(c_.actor.unroll_length),
      K_(c_.env.num_envs),
      B_(c_.learner.batch_size),
      spec_(o_.env),
      rank_(o_.collective ? o_.collective->rank() : 0),
      id_(rank_ == 0 ? c_.run.name : fmt::format("{}-rank{}", c_.run.name, rank_)),
      ring_name_(buffer::own_segment_name(buffer::kRingSegment, id_)),
      slab_name_(buffer::own_segment_name(buffer::kSlabSegment, id_)),
      ring_(create_ring(c_, ring_name_, spec_)),
      trainer_(c_, spec_),
      slab_(buffer::WeightSlab::create(slab_name_, trainer_.model()->parameter_count())),
      flat_(trainer_.model()->parameter_count()),
      checkpoints_(o.run_dir + "/checkpoints"),
      config_digest_(fmt::format("{:016x}", fnv1a(to_toml(c_)))),
      reporter_(o.run_dir, c_.run.name + " on " + spec_.name),
      initial_actors_(initial_actor_count(c_.actor)) {
  if (o.resume && rank_ == 0) resume();
  if (o_.collective) share_initial_state();
  trainer_.model()->write_flat(flat_.data());
  version_ = slab_->publish(flat_.data());
  publish_status();
}

std::unique_ptr<buffer::Ring> Learner::Loop::create_ring(const Config& c, const std::string& name,
                                                         const EnvSpec& spec) {
  remove_stale_segments();
  return buffer::Ring::create(name, buffer::unroll_spec_for(spec, c),
                              static_cast<uint32_t>(c.learner.ring_slots));
}

void Learner::Loop::start_actors() {
  const int actors = initial_actors_;
  supervisor_.emplace(
      std::vector<std::string>{"actor-process", "--ring", ring_name_, "--slab", slab_name_,
                               "--config", o_.run_dir + "/config.toml", "--learner-pid",
                               std::to_string(getpid()), "--rank", std::to_string(rank_)},
      actors,
      SupervisorOptions{.limits = {c_.actor.max_crashes, as_duration(c_.actor.stall_timeout_s)}});
  prefetcher_.emplace(*ring_, spec_, c_, version_);
  if (o_.remote_actors) remote_ = o_.remote_actors(*ring_, *slab_, to_toml(c_));
  spdlog::info(
      "training {} on {} in {}: {} actors × {} envs, unrolls of {}, batches of {}, learner on {}",
      c_.run.name, spec_.name, o_.run_dir, actors, K_, T_, B_, trainer_.device().str());
}

void Learner::Loop::resume() {
  const ResumePoint r = resume_from_checkpoints(checkpoints_, trainer_, c_);
  const RunCounters& n = r.counters;
  stats_.env_steps = n.env_steps;
  stats_.learner_steps = n.learner_steps;
  stats_.episodes = n.episodes;
  slab_->set_version(n.policy_version);
  spdlog::info("resumed from {}: {} env steps, {} learner steps, policy version {}", r.path,
               n.env_steps, n.learner_steps, n.policy_version);
}

Checkpoint Learner::Loop::snapshot() {
  Checkpoint ck;
  ck.counters = {stats_.env_steps, stats_.learner_steps, stats_.episodes, version_};
  ck.parameters = flat_;
  ck.parameter_layout = parameter_layout(*trainer_.model());
  ck.optimizer = trainer_.optimizer_state();
  at::Tensor state = at::detail::getDefaultCPUGenerator().get_state();
  ck.rng.assign(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()), state.numel());
  return ck;
}

std::string Learner::Loop::checkpoint() {
  stats_.last_checkpoint =
      save_checkpoint(checkpoints_, snapshot(), static_cast<int>(c_.run.keep_checkpoints));
  stats_.last_checkpoint_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return stats_.last_checkpoint;
}

// One learner step on a prepared batch; weights published.
void Learner::Loop::learn(PreparedBatch& prepared) {
  StageTimes& times = stats_.stage_time;
  times.learner_batch_s += prepared.batch_s;
  const double progress = static_cast<double>(stats_.env_steps) / c_.run.total_steps;
  const StepStats step = trainer_.learn(prepared.batch, progress);
  const auto publish_start = Clock::now();
  trainer_.model()->write_flat(flat_.data());
  version_ = slab_->publish(flat_.data());
  prefetcher_->set_version(version_);
  times.learner_publish_s += seconds(Clock::now() - publish_start);
  stats_.add(prepared.batch, step, prepared.unrolls, static_cast<uint64_t>(T_ * K_ * B_));
  stats_.local_env_steps += static_cast<uint64_t>(T_ * K_ * B_);
}

// Rank 0: takes a finished evaluation, and starts one every
// run.eval_interval_s, or at once while the training mean is at the target
// (which only an evaluation can confirm: solved is both at the target). The evaluator copies the
// state and runs on its own thread: training goes on meanwhile.
void Learner::Loop::evaluate(Clock::time_point now) {
  if (!evaluator_) return;
  const bool at_target = training_at_target();
  if (std::optional<EvalReport> done = evaluator_->take()) {
    const Evaluation& e = done->result;
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
  const bool due = c_.run.eval_interval_s > 0 && now >= next_eval_;
  if ((at_target || due) && !evaluator_->busy() && evaluator_->start(snapshot())) {
    next_eval_ = now + as_duration(c_.run.eval_interval_s);
  }
}

// The last metrics line of a run that failed: state "failed" and the error,
// over the counters as they were. A second failure (the disk, say) while
// writing it is the first one's to report, not this line's.
void Learner::Loop::report_failure(const std::exception& error) noexcept {
  try {
    state_ = "failed";
    end_reason_ = reason_of(error);
    report(Clock::now());
  } catch (...) {
  }
}

// A metrics.jsonl line, the curves and the progress line.
void Learner::Loop::report(Clock::time_point now) {
  const double interval = std::max(1e-9, seconds(now - last_report_));
  stats_.sps = (stats_.env_steps - steps_at_report_) / interval;
  stats_.learner_steps_per_s = (stats_.learner_steps - learner_steps_at_report_) / interval;
  stats_.local_sps = (stats_.local_env_steps - local_steps_at_report_) / interval;
  local_steps_at_report_ = stats_.local_env_steps;
  last_report_ = now;
  steps_at_report_ = stats_.env_steps;
  learner_steps_at_report_ = stats_.learner_steps;
  const std::string health = health_.observe(seconds(now - start_), stats_.env_steps,
                                             supervisor_ ? supervisor_->restarts() : 0,
                                             supervisor_ ? supervisor_->desired() : 0);
  if (!health.empty() && health != health_line_) spdlog::warn("health: {}", health);
  health_line_ = health;
  const v1::Status s = status();
  board_.publish(s);
  reporter_.report(s, stats_, seconds(now - start_));
}

TrainResult Learner::Loop::run() {
  start_actors();
  auto last_status = Clock::now();
  auto next_checkpoint = last_status + as_duration(c_.run.checkpoint_interval_s);
  last_report_ = last_status;
  steps_at_report_ = stats_.env_steps;  // after any resume
  learner_steps_at_report_ = stats_.learner_steps;
  if (rank_ == 0) evaluator_.emplace(c_, spec_, checkpoints_);
  next_eval_ = last_status + as_duration(c_.run.eval_interval_s);
  bool reached_target = false, finished = false;  // finished: target or step budget reached
  // Several learners wait for a batch only so long, then step with none.
  const auto batch_wait =
      parallel_ ? std::chrono::milliseconds(c_.distributed.batch_wait_ms) : 100ms;
  // A metrics line every run.report_interval_s, also while no batch comes:
  // a job waiting on its actors says so.
  const auto report_if_due = [&](Clock::time_point now) {
    if (seconds(now - last_report_) >= c_.run.report_interval_s) report(now);
  };
  while (parallel_ || (!stop_.load() && !stop_requested_)) {
    supervisor_->poll(ring_->counters().committed);  // throws when actors keep failing
    while (auto pending = board_.next()) handle(*pending);
    if (stop_requested_ && !parallel_) break;
    auto now = Clock::now();
    if (now - last_status >= 100ms) {
      if (remote_) remote_rows_ = remote_->nodes();  // fresh while nothing trains, too
      publish_status();
      last_status = now;
    }
    const auto wait_start = Clock::now();
    // A rank that had nothing while others trained enters the next step at
    // once: waiting again would hold every rank back by batch_wait_ms.
    std::optional<PreparedBatch> prepared = prefetcher_->next(enter_at_once_ ? 0ms : batch_wait);
    stats_.stage_time.learner_wait_s += seconds(Clock::now() - wait_start);
    evaluate(Clock::now());
    if (parallel_) {
      // Every rank leaves at the same step: a stop anywhere is a vote.
      const bool had_batch = prepared.has_value();
      const ClusterStep cluster = learn_together(prepared);
      enter_at_once_ = !had_batch && cluster.samples > 0;
      if (cluster.stop) {
        stop_requested_ = true;
        if (cluster.stop_now) checkpoint_at_stop_ = false;  // `stop --now` on any rank
        break;
      }
      reached_target = cluster.target;
      if (reached_target) cluster_return_ = cluster.target_return;
      if (cluster.samples == 0) {
        report_if_due(Clock::now());
        continue;
      }
    } else {
      if (!prepared) {
        report_if_due(Clock::now());
        continue;
      }
      learn(*prepared);
      // The step may have moved the training mean off the target: then the
      // next evaluation decides again.
      eval_reached_target_ = eval_reached_target_ && training_at_target();
      reached_target = eval_reached_target_;
    }
    now = Clock::now();
    finished = reached_target || stats_.env_steps >= static_cast<uint64_t>(c_.run.total_steps);
    if (finished) break;
    report_if_due(now);
    if (rank_ == 0 && c_.run.checkpoint_interval_s > 0 && now >= next_checkpoint) {
      next_checkpoint = now + as_duration(c_.run.checkpoint_interval_s);
      try {
        checkpoint();
      } catch (const Error& e) {  // a full disk: training goes on, the checkpoint is retried
        const auto retry =
            std::min(as_duration(c_.run.checkpoint_interval_s), as_duration(kCheckpointRetryS));
        spdlog::error("{}; training goes on, next try in {:.0f} s", e.what(), seconds(retry));
        next_checkpoint = now + retry;
      }
    }
  }
  // The batch prepared during the last step has left the ring. A stopped run
  // trains on it (a resume goes on from there); a finished one drops it, so
  // that its result, its last metrics line and its checkpoint are one state.
  // Several learners take no step alone: theirs is dropped either way.
  if (std::optional<PreparedBatch> left = prefetcher_->stop()) {
    if (finished || parallel_) {
      stats_.untrained_unrolls += left->unrolls;
    } else {
      learn(*left);
    }
  }
  state_ = "finished";
  end_reason_ = reached_target ? "reached the target return"
                : stats_.env_steps >= static_cast<uint64_t>(c_.run.total_steps)
                    ? "reached run.total_steps"
                : stop_requested_ ? "stopped on request"
                                  : "stopped by a signal";
  report(Clock::now());
  end_progress();  // the lines that follow start on their own
  std::string final_checkpoint;
  if (rank_ == 0 && checkpoint_at_stop_ && (stats_.learner_steps > 0 || stop_requested_)) {
    final_checkpoint = checkpoint();
    spdlog::info("checkpoint {}", final_checkpoint);
  }
  evaluator_.reset();  // an evaluation under way is cancelled
  publish_status();    // with the final checkpoint: the last status a stream sends
  board_.close();      // refuse new requests; end status streams
  ControlReply stopped;
  stopped.checkpoint_path = final_checkpoint;
  for (auto& reply : stop_replies_) reply(stopped);
  end_remote_actors(true);
  supervisor_->stop();
  if (parallel_) {
    // Equal on every rank: the tests and a user compare these lines.
    spdlog::info("rank {}: parameter checksum {:016x} after {} learner steps, policy version {}",
                 rank_, parallel_->parameter_checksum(), stats_.learner_steps, version_);
  }
  return {
      .env_steps = stats_.env_steps,
      .learner_steps = stats_.learner_steps,
      .seconds = elapsed(),
      .return_mean = stats_.return_mean(),
      .eval_return_mean = parallel_ && reached_target ? cluster_return_ : stats_.eval_return_mean,
      .eval_episodes = parallel_ && reached_target
                           ? static_cast<uint64_t>(c_.run.eval_episodes)  // rank 0's
                           : stats_.eval_episodes,
      .reached_target = reached_target};
}

Learner::Learner(const TrainOptions& options, ControlBoard& board, const std::atomic<bool>& stop) {
  keep_freed_memory_in_heap();
  set_compute_threads(
      options.config.learner.threads > 0 ? static_cast<int>(options.config.learner.threads) : 1);
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
