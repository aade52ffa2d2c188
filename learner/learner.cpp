#include "learner/learner.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>

#include "buffer/ring.h"
#include "buffer/segment_names.h"
#include "buffer/weight_slab.h"
#include "core/error.h"
#include "core/files.h"
#include "core/fnv.h"
#include "core/tensor_runtime.h"
#include "core/token.h"
#include "envs/env.h"
#include "envs/plugin_probe.h"
#include "learner/batch_prefetcher.h"
#include "learner/checkpoint.h"
#include "learner/control_board.h"
#include "learner/control_server.h"
#include "learner/curves.h"
#include "learner/metrics_exporter.h"
#include "learner/supervisor.h"
#include "learner/trainer.h"
#include "proto/status_json.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration as_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

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

int actor_count(const Config& c) {
  if (c.actor.count > 0) return static_cast<int>(c.actor.count);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(std::max(1L, cores - 1));  // the learner keeps one core
}

// The run's counters and recent statistics: the one source of metrics.jsonl,
// the progress line, GetStatus and /metrics.
struct RunStats {
  uint64_t env_steps = 0, learner_steps = 0, episodes = 0;  // since the run began
  uint64_t unrolls = 0, lag_sum = 0, lag_max = 0;           // since this learner started
  std::deque<float> recent;                                 // returns of the last 100 episodes
  std::deque<int32_t> recent_lengths;                       // and their lengths
  StepStats last;
  double sps = 0, learner_steps_per_s = 0;  // over the last report interval
  std::string last_checkpoint;
  double last_checkpoint_unix_s = 0;
  v1::StageTimes stage_time;

  // One learner step on `b` (`taken_unrolls` unrolls, `steps` env steps).
  void add(const Batch& b, const StepStats& step, size_t taken_unrolls, uint64_t steps) {
    last = step;
    stage_time.set_actor_env_s(stage_time.actor_env_s() + b.actor_env_s);
    stage_time.set_actor_policy_s(stage_time.actor_policy_s() + b.actor_policy_s);
    stage_time.set_actor_wait_s(stage_time.actor_wait_s() + b.actor_wait_s);
    stage_time.set_learner_forward_s(stage_time.learner_forward_s() + last.forward_s);
    stage_time.set_learner_backward_s(stage_time.learner_backward_s() + last.backward_s);
    stage_time.set_learner_optimizer_s(stage_time.learner_optimizer_s() + last.optimizer_s);
    env_steps += steps;
    ++learner_steps;
    unrolls += taken_unrolls;
    lag_sum += b.lag_sum;
    lag_max = std::max(lag_max, b.lag_max);
    for (size_t i = 0; i < b.episode_returns.size(); ++i) {
      recent.push_back(b.episode_returns[i]);
      recent_lengths.push_back(b.episode_lengths[i]);
      if (recent.size() > 100) {
        recent.pop_front();
        recent_lengths.pop_front();
      }
    }
    episodes += b.episode_returns.size();
  }
  double return_mean() const {
    return recent.empty() ? 0.0
                          : std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
  }
};

// Where this learner's control plane listens, for `pronghorn status --run-dir`
// and for port 0 (any free port): "<host>:<port>" in <run_dir>/server.address.
void write_server_address(const std::string& run_dir, const std::string& configured, int port) {
  const std::string host = configured.substr(0, configured.rfind(':'));
  write_file_atomically(run_dir + "/server.address", host + ":" + std::to_string(port) + "\n");
}

// One learner and its node's actors: setup, then run() until done.
class LearnerLoop {
 public:
  LearnerLoop(const TrainOptions& o, const std::atomic<bool>& stop)
      : o_(o),
        c_(o.config),
        stop_(stop),
        T_(c_.actor.unroll_length),
        K_(c_.env.num_envs),
        B_(c_.learner.batch_size),
        spec_(probe_spec(c_)),
        id_(c_.run.name),
        ring_name_(buffer::own_segment_name(buffer::kRingSegment, id_)),
        slab_name_(buffer::own_segment_name(buffer::kSlabSegment, id_)),
        ring_(create_ring(c_, ring_name_, spec_)),
        trainer_(c_, spec_),
        slab_(buffer::WeightSlab::create(slab_name_, trainer_.model()->parameter_count())),
        flat_(trainer_.model()->parameter_count()),
        checkpoints_(o.run_dir + "/checkpoints"),
        config_digest_(fmt::format("{:016x}", fnv1a(to_toml(c_)))) {
    if (o.resume) resume();
    trainer_.model()->write_flat(flat_.data());
    version_ = slab_->publish(flat_.data());
    publish_status();
    server_.emplace(c_.server, server_token(), board_);
    write_server_address(o.run_dir, c_.server.address, server_->port());
    if (c_.server.metrics_port >= 0) {
      metrics_exporter_.emplace(static_cast<int>(c_.server.metrics_port), board_);
      spdlog::info("Prometheus metrics on http://127.0.0.1:{}/metrics", metrics_exporter_->port());
    }
    const int actors = actor_count(c_);
    supervisor_.emplace(std::vector<std::string>{"actor", "--ring", ring_name_, "--slab",
                                                 slab_name_, "--config", o.run_dir + "/config.toml",
                                                 "--learner-pid", std::to_string(getpid())},
                        actors);
    prefetcher_.emplace(*ring_, spec_, c_, version_);
    spdlog::info(
        "training {} on {}: {} actors × {} envs, unrolls of {}, batches of {}, learner on {}",
        c_.run.name, spec_.name, actors, K_, T_, B_, trainer_.device().str());
  }

  TrainResult run();

 private:
  static envs::EnvSpec probe_spec(const Config& c) {
    return envs::probe_env_spec(c.env);  // a plugin is tried in a child process
  }
  static std::unique_ptr<buffer::Ring> create_ring(const Config& c, const std::string& name,
                                                   const envs::EnvSpec& spec) {
    remove_stale_segments();
    return buffer::Ring::create(
        name, buffer::unroll_spec_for(spec, c.actor.unroll_length, c.env.num_envs),
        static_cast<uint32_t>(c.learner.ring_slots));
  }
  std::string server_token() const {
    return c_.server.token_file.empty() ? read_or_create_token_file(o_.run_dir + "/token")
                                        : read_token_file(c_.server.token_file);
  }
  void resume();
  std::string checkpoint();
  void handle(ControlBoard::Pending& pending);
  v1::Status status() const;
  void publish_status() { board_.publish(status()); }
  void learn(PreparedBatch& prepared);
  void report(Clock::time_point now);
  double elapsed() const { return seconds(Clock::now() - start_); }

  const TrainOptions& o_;
  const Config& c_;
  const std::atomic<bool>& stop_;
  const int64_t T_, K_, B_;
  const envs::EnvSpec spec_;
  const std::string id_, ring_name_, slab_name_;  // shared memory of this learner
  std::unique_ptr<buffer::Ring> ring_;
  Trainer trainer_;
  std::unique_ptr<buffer::WeightSlab> slab_;
  std::vector<float> flat_;  // the model's parameters, as published
  const std::string checkpoints_;
  const std::string run_dir_absolute_ = std::filesystem::absolute(o_.run_dir).string();
  const std::string config_digest_;
  uint64_t version_ = 0;
  RunStats stats_;
  const Clock::time_point start_ = Clock::now();
  // Destroyed in reverse: actors first, then the control plane, then the board.
  ControlBoard board_;
  std::optional<ControlServer> server_;
  std::optional<MetricsExporter> metrics_exporter_;
  std::optional<Supervisor> supervisor_;
  std::optional<BatchPrefetcher> prefetcher_;  // stopped before the actors
  bool stop_requested_ = false, checkpoint_at_stop_ = true;
  std::vector<ControlAnswer> stop_replies_;  // answered once stopped
  std::ofstream metrics_{o_.run_dir + "/metrics.jsonl", std::ios::app};
  bool metrics_lost_ = false;  // the last write failed
  Clock::time_point last_report_;
  uint64_t steps_at_report_ = 0, learner_steps_at_report_ = 0;  // set when run() starts
  std::vector<CurvePoint> curve_;
};

void LearnerLoop::resume() {
  std::string path;
  std::optional<Checkpoint> ckpt = load_newest_checkpoint(checkpoints_, &path);
  PRONGHORN_CHECK(ckpt.has_value(), "resume: no valid checkpoint in ", checkpoints_);
  PRONGHORN_CHECK(ckpt->parameters.size() == flat_.size(), "resume: checkpoint ", path, " holds ",
                  ckpt->parameters.size(), " parameters, the model has ", flat_.size());
  trainer_.model()->read_flat(ckpt->parameters.data());
  trainer_.load_optimizer_state(ckpt->optimizer);
  if (!ckpt->rng.empty()) {
    at::Tensor state = at::empty({static_cast<int64_t>(ckpt->rng.size())}, at::kByte);
    std::memcpy(state.data_ptr<uint8_t>(), ckpt->rng.data(), ckpt->rng.size());
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(state);
  }
  stats_.env_steps = ckpt->env_steps;
  stats_.learner_steps = ckpt->learner_steps;
  stats_.episodes = ckpt->episodes;
  slab_->set_version(ckpt->policy_version);
  spdlog::info("resumed from {}: {} env steps, {} learner steps, policy version {}", path,
               stats_.env_steps, stats_.learner_steps, ckpt->policy_version);
}

std::string LearnerLoop::checkpoint() {
  Checkpoint ck;
  ck.env_steps = stats_.env_steps;
  ck.learner_steps = stats_.learner_steps;
  ck.episodes = stats_.episodes;
  ck.policy_version = version_;
  ck.parameters = flat_;
  ck.optimizer = trainer_.optimizer_state();
  at::Tensor state = at::detail::getDefaultCPUGenerator().get_state();
  ck.rng.assign(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()), state.numel());
  stats_.last_checkpoint =
      save_checkpoint(checkpoints_, ck, static_cast<int>(c_.run.keep_checkpoints));
  stats_.last_checkpoint_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return stats_.last_checkpoint;
}

// Carries out one request of the control plane, between learner steps.
void LearnerLoop::handle(ControlBoard::Pending& pending) {
  const ControlRequest& r = pending.request;
  ControlReply reply;
  try {
    switch (r.kind) {
      case ControlRequest::Kind::kScaleActors:
        reply.previous_actors = supervisor_->desired();
        supervisor_->scale(r.actors);
        reply.actors = supervisor_->desired();
        spdlog::info("actors scaled from {} to {}", reply.previous_actors, reply.actors);
        break;
      case ControlRequest::Kind::kSaveCheckpoint:
        reply.checkpoint_path = checkpoint();
        spdlog::info("checkpoint {} (requested)", reply.checkpoint_path);
        break;
      case ControlRequest::Kind::kStop:
        spdlog::info("stop requested ({})", r.graceful ? "graceful" : "immediate");
        stop_requested_ = true;
        checkpoint_at_stop_ = checkpoint_at_stop_ && r.graceful;
        stop_replies_.push_back(std::move(pending.reply));
        return;  // answered once stopped
    }
  } catch (const std::exception& e) {  // a failed checkpoint write: the job goes on
    spdlog::error("control request failed: {}", e.what());
    reply.error = e.what();
  }
  publish_status();  // before the reply: a caller's next GetStatus sees the change
  pending.reply(reply);
}

v1::Status LearnerLoop::status() const {
  v1::Status s;
  s.set_run_name(c_.run.name);
  s.set_run_dir(run_dir_absolute_);
  s.set_env_name(spec_.name);
  s.set_config_digest(config_digest_);
  s.set_uptime_s(elapsed());
  s.set_env_steps(stats_.env_steps);
  s.set_sps(stats_.sps);
  s.set_learner_steps_per_s(stats_.learner_steps_per_s);
  s.set_learner_steps(stats_.learner_steps);
  s.set_policy_version(version_);
  s.set_episodes(stats_.episodes);
  auto* returns = s.mutable_episode_return();
  returns->set_count(static_cast<uint32_t>(stats_.recent.size()));
  if (!stats_.recent.empty()) {
    returns->set_mean(stats_.return_mean());
    returns->set_min(*std::min_element(stats_.recent.begin(), stats_.recent.end()));
    returns->set_max(*std::max_element(stats_.recent.begin(), stats_.recent.end()));
    s.set_episode_length_mean(
        std::accumulate(stats_.recent_lengths.begin(), stats_.recent_lengths.end(), 0.0) /
        stats_.recent_lengths.size());
  }
  auto* loss = s.mutable_loss();
  loss->set_total(stats_.last.total);
  loss->set_policy(stats_.last.policy);
  loss->set_value(stats_.last.value);
  loss->set_entropy(stats_.last.entropy);
  s.set_grad_norm(stats_.last.grad_norm);
  s.set_policy_lag_mean(stats_.unrolls ? static_cast<double>(stats_.lag_sum) / stats_.unrolls : 0);
  s.set_policy_lag_max(stats_.lag_max);
  const buffer::RingCounters rc = ring_->counters();
  s.set_ring_slots(static_cast<uint32_t>(c_.learner.ring_slots));
  s.set_ring_occupancy(static_cast<uint32_t>(rc.ready));
  s.set_unrolls_committed(rc.committed);
  s.set_unrolls_consumed(rc.consumed);
  s.set_unrolls_dropped_stale(rc.dropped_stale);
  if (supervisor_) {
    s.set_actors_alive(static_cast<uint32_t>(supervisor_->alive()));
    s.set_actors_desired(static_cast<uint32_t>(supervisor_->desired()));
    s.set_actor_restarts(supervisor_->restarts());
  }
  s.set_metrics_port(metrics_exporter_ ? static_cast<uint32_t>(metrics_exporter_->port()) : 0);
  s.set_last_checkpoint_path(stats_.last_checkpoint);
  s.set_last_checkpoint_unix_s(stats_.last_checkpoint_unix_s);
  s.set_stopping(stop_requested_ || stop_.load());
  *s.mutable_stage_time() = stats_.stage_time;
  return s;
}

// One learner step on a prepared batch; weights published.
void LearnerLoop::learn(PreparedBatch& prepared) {
  v1::StageTimes& times = stats_.stage_time;
  times.set_learner_batch_s(times.learner_batch_s() + prepared.batch_s);
  const double progress = static_cast<double>(stats_.env_steps) / c_.run.total_steps;
  const StepStats step = trainer_.learn(prepared.batch, progress);
  const auto publish_start = Clock::now();
  trainer_.model()->write_flat(flat_.data());
  version_ = slab_->publish(flat_.data());
  prefetcher_->set_version(version_);
  times.set_learner_publish_s(times.learner_publish_s() + seconds(Clock::now() - publish_start));
  stats_.add(prepared.batch, step, prepared.unrolls, static_cast<uint64_t>(T_ * K_ * B_));
}

// A metrics.jsonl line, the curves and the progress line.
void LearnerLoop::report(Clock::time_point now) {
  const double elapsed_s = seconds(now - start_);
  const double interval = std::max(1e-9, seconds(now - last_report_));
  stats_.sps = (stats_.env_steps - steps_at_report_) / interval;
  stats_.learner_steps_per_s = (stats_.learner_steps - learner_steps_at_report_) / interval;
  last_report_ = now;
  steps_at_report_ = stats_.env_steps;
  learner_steps_at_report_ = stats_.learner_steps;
  const v1::Status s = status();
  board_.publish(s);
  if (!(metrics_ << status_json(s) << "\n" << std::flush)) {
    // A full disk: this line is lost, the next is tried; said once per outage.
    if (!metrics_lost_) spdlog::error("{}/metrics.jsonl: cannot write; lines are lost until it can", o_.run_dir);
    metrics_lost_ = true;
    metrics_.clear();
  } else {
    metrics_lost_ = false;
  }
  if (!stats_.recent.empty()) {
    curve_.push_back({static_cast<double>(stats_.env_steps), elapsed_s, stats_.return_mean()});
    write_curves_svg(o_.run_dir + "/curves.svg", c_.run.name + " on " + spec_.name, curve_);
  }
  std::fprintf(stderr, "\r%8.1fs  %10llu steps  %7.0f SPS  %6llu episodes  return %7.1f   ",
               elapsed_s, static_cast<unsigned long long>(stats_.env_steps), stats_.sps,
               static_cast<unsigned long long>(stats_.episodes), stats_.return_mean());
}

TrainResult LearnerLoop::run() {
  auto last_status = Clock::now();
  auto next_checkpoint = last_status + as_duration(c_.run.checkpoint_interval_s);
  last_report_ = last_status;
  steps_at_report_ = stats_.env_steps;  // after any resume
  learner_steps_at_report_ = stats_.learner_steps;
  bool reached_target = false, finished = false;  // finished: target or step budget reached
  TrainResult result;
  while (!stop_.load() && !stop_requested_) {
    supervisor_->poll();
    while (auto pending = board_.next()) handle(*pending);
    if (stop_requested_) break;
    auto now = Clock::now();
    if (now - last_status >= 100ms) {
      publish_status();
      last_status = now;
    }
    const auto wait_start = Clock::now();
    std::optional<PreparedBatch> prepared = prefetcher_->next(100ms);
    v1::StageTimes& times = stats_.stage_time;
    times.set_learner_wait_s(times.learner_wait_s() + seconds(Clock::now() - wait_start));
    if (!prepared) continue;
    learn(*prepared);
    now = Clock::now();
    reached_target = c_.run.target_return != 0 && stats_.recent.size() >= 100 &&
                     stats_.return_mean() >= c_.run.target_return;
    const bool done =
        reached_target || stats_.env_steps >= static_cast<uint64_t>(c_.run.total_steps);
    if (done) {
      // What the run ends on, before the last prepared batch adds its episodes.
      result.env_steps = stats_.env_steps;
      result.seconds = elapsed();
      result.return_mean = stats_.return_mean();
      finished = true;
      break;
    }
    if (seconds(now - last_report_) >= c_.run.report_interval_s) report(now);
    if (c_.run.checkpoint_interval_s > 0 && now >= next_checkpoint) {
      next_checkpoint = now + as_duration(c_.run.checkpoint_interval_s);
      try {
        checkpoint();
      } catch (const Error& e) {  // a full disk: training goes on, the checkpoint is retried
        const auto retry = std::min(as_duration(c_.run.checkpoint_interval_s),
                                    as_duration(kCheckpointRetryS));
        spdlog::error("{}; training goes on, next try in {:.0f} s", e.what(), seconds(retry));
        next_checkpoint = now + retry;
      }
    }
  }
  // The batch prepared during the last step left the ring: train on it too.
  if (std::optional<PreparedBatch> left = prefetcher_->stop()) learn(*left);
  report(Clock::now());
  std::string final_checkpoint;
  if (checkpoint_at_stop_ && (stats_.learner_steps > 0 || stop_requested_)) {
    final_checkpoint = checkpoint();
    spdlog::info("checkpoint {}", final_checkpoint);
  }
  std::fprintf(stderr, "\n");
  board_.close();  // refuse new requests; end status streams
  ControlReply stopped;
  stopped.checkpoint_path = final_checkpoint;
  for (auto& reply : stop_replies_) reply(stopped);
  if (!finished) {  // stopped by a signal or a Stop call
    result.env_steps = stats_.env_steps;
    result.seconds = elapsed();
    result.return_mean = stats_.return_mean();
  }
  result.learner_steps = stats_.learner_steps;
  result.reached_target = reached_target;
  supervisor_->stop();
  return result;
}

}  // namespace

TrainResult train(const TrainOptions& options, const std::atomic<bool>& stop) {
  keep_freed_memory_in_heap();
  set_compute_threads(
      options.config.learner.threads > 0 ? static_cast<int>(options.config.learner.threads) : 1);
  torch::manual_seed(options.config.run.seed);
  LearnerLoop loop(options, stop);
  if (options.on_started) options.on_started();
  return loop.run();
}

}  // namespace pronghorn::learner
