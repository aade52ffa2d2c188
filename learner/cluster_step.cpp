#include "learner/cluster_step.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <utility>

#include "core/clock.h"
#include "core/error.h"
#include "learner/data_parallel.h"

namespace pronghorn::learner {
namespace {

class ClusterStepper final : public LearnerStep {
 public:
  ClusterStepper(const TrainOptions& o, PolicyTraining& policy, ActorFleet& fleet, RunStats& stats,
                 const ControlBoard& board)
      : o_(o),
        samples_(fleet.batch_env_steps()),
        policy_(policy),
        fleet_(fleet),
        stats_(stats),
        board_(board),
        parallel_(start(o, policy, fleet, stats)),
        lockstep_(o.config.run.deterministic) {}

  // A rank that had nothing while others trained enters the next step at
  // once: waiting again would hold every rank back by batch_wait_ms.
  std::chrono::milliseconds batch_wait() const override {
    return enter_at_once_ ? std::chrono::milliseconds(0)
                          : std::chrono::milliseconds(o_.config.distributed.batch_wait_ms);
  }
  bool stops_alone() const override { return false; }
  bool holds_batch() const override { return held_.has_value(); }

  StepOutcome take(std::optional<PreparedBatch>& prepared, const StepVotes& votes,
                   const std::function<bool()>& solved) override;
  bool reached_target() const override { return reached_; }

  // Several learners take no step alone: the batch left is dropped.
  void finish(std::optional<PreparedBatch> left, bool) override {
    if (left) stats_.untrained_unrolls += left->unrolls;
    if (held_) stats_.untrained_unrolls += held_->unrolls;
    // Equal on every rank: the tests and a user compare these lines.
    spdlog::info("rank {}: parameter checksum {:016x} after {} learner steps, policy version {}",
                 parallel_.rank(), parallel_.parameter_checksum(), stats_.learner_steps,
                 policy_.version());
  }
  void describe(LiveState& live) const override {
    live.world_size = static_cast<uint32_t>(parallel_.world_size());
    live.ranks = rank_rows_;
  }
  // Solved on any rank: its evaluation is the run's.
  void complete(TrainResult& r) const override {
    if (!reached_) return;
    r.eval_return_mean = cluster_return_;
    r.eval_episodes = static_cast<uint64_t>(o_.config.run.eval_episodes);  // rank 0's
  }

 private:
  static DataParallel start(const TrainOptions& o, PolicyTraining& policy, const ActorFleet& fleet,
                            RunStats& stats);

  const TrainOptions& o_;
  const uint64_t samples_;  // env steps in this rank's batch
  PolicyTraining& policy_;
  ActorFleet& fleet_;
  RunStats& stats_;
  const ControlBoard& board_;
  DataParallel parallel_;
  // run.deterministic: a step waits for every rank's batch (lockstep_), this
  // rank's kept meanwhile.
  const bool lockstep_;
  std::optional<PreparedBatch> held_;
  bool enter_at_once_ = false;
  bool reached_ = false;
  double cluster_return_ = 0;              // the return that reached the target
  std::vector<v1::RankStatus> rank_rows_;  // rank 0: every rank's last row
};

// Rank 0's weights, optimizer state and counters (fresh or resumed) on every rank.
DataParallel ClusterStepper::start(const TrainOptions& o, PolicyTraining& policy,
                                   const ActorFleet& fleet, RunStats& stats) {
  const Config& c = o.config;
  distributed::Collective& collective = *o.collective;
  // The all-reduce counts samples in floats, exact below 2^24; every rank has
  // the same config, so every rank refuses here together.
  const double step_samples =
      static_cast<double>(fleet.batch_env_steps()) * collective.world_size();
  if (step_samples >= (1 << 24)) {
    throw UsageError(fmt::format(
        "actor.unroll_length × env.num_envs × learner.batch_size × world size = {:.0f} samples "
        "a step; several learners count at most 2^24 (16777216)",
        step_samples));
  }
  DataParallel parallel(collective, policy.trainer(),
                        c.loss.reduction == LossConfig::Reduction::kMean);
  RunCounters counters{stats.env_steps, stats.learner_steps, stats.episodes,
                       policy.slab().version()};
  parallel.share_initial_state(counters);
  stats.env_steps = counters.env_steps;
  stats.learner_steps = counters.learner_steps;
  stats.episodes = counters.episodes;
  policy.set_version(counters.policy_version);
  spdlog::info("rank {} of {}: starting from rank 0's state ({} env steps, policy version {})",
               collective.rank(), collective.world_size(), counters.env_steps,
               counters.policy_version);
  return parallel;
}

// One batch of every rank together (data_parallel.h): per optimizer step,
// this rank's gradients (none without a batch), the all-reduce, and the same
// optimizer step everywhere; the weights published once after the last.
// Counters advance by the cluster's samples. Every rank leaves at the same
// step: a stop anywhere is a vote.
StepOutcome ClusterStepper::take(std::optional<PreparedBatch>& prepared, const StepVotes& votes,
                                 const std::function<bool()>& solved) {
  if (lockstep_) {
    // Every rank steps on its batch or none does: which batches meet in a
    // step is then the same every run. A rank still without one holds the
    // others in this vote for batch_wait() at a time (it polls its fleet and
    // its requests in between). Rank 0 holds no batch while it evaluates:
    // an evaluation starts only after a step, which took them all.
    PRONGHORN_ASSERT(!(prepared && held_), "the loop takes no batch while one is held");
    if (prepared) held_ = std::move(prepared);
    const auto vote_start = SteadyClock::now();
    const DataParallel::Readiness ready =
        parallel_.agree_ready(held_.has_value(), votes.stop, votes.stop_now);
    stats_.stage_time.learner_wait_s += seconds_since(vote_start);
    // A stop leaves before any rank trains: the held batches are finish()'s.
    if (ready.stop) return {.leave = true, .stop_now = ready.stop_now};
    if (!ready.all_ready) return {};
    prepared = std::exchange(held_, std::nullopt);
  }
  if (prepared) stats_.stage_time.learner_batch_s += prepared->batch_s;
  // Rank 0 evaluates: its evaluation reaching the target stops every rank.
  const bool target_here = solved();
  RankRow row = fleet_.row();
  row.sps = stats_.local_sps;
  row.allreduce_s = stats_.last_allreduce_s;
  row.local_env_steps = stats_.local_env_steps;
  row.control_port = static_cast<uint32_t>(board_.control_port());
  StepStats step;
  const ClusterStep cluster =
      parallel_.learn(prepared ? &prepared->batch : nullptr,
                      {.stop = votes.stop,
                       .stop_now = votes.stop_now,
                       .target = target_here,
                       .target_return = target_here ? stats_.eval_return_mean : 0.0,
                       .row = row},
                      static_cast<double>(stats_.env_steps) / o_.config.run.total_steps, step);
  if (parallel_.rank() == 0)
    rank_rows_ = make_rank_rows(cluster.rows, o_.rank_nodes, o_.rank_hosts);
  stats_.stage_time.learner_allreduce_s += step.allreduce_s;
  stats_.last_allreduce_s = step.allreduce_s;
  enter_at_once_ = !prepared && cluster.samples > 0;
  if (cluster.stop) return {.leave = true, .stop_now = cluster.stop_now};
  reached_ = cluster.target;
  if (reached_) cluster_return_ = cluster.target_return;
  if (cluster.samples == 0) return {};  // nobody had a batch: no step anywhere
  stats_.stage_time.learner_publish_s += publish_weights(policy_, fleet_);
  stats_.add(prepared ? prepared->batch : Batch{}, step, prepared ? prepared->unrolls : 0,
             cluster.samples);
  stats_.local_env_steps += prepared ? samples_ : 0;
  const int64_t interval = o_.config.distributed.check_interval_steps;
  if (interval > 0 && stats_.learner_steps % static_cast<uint64_t>(interval) == 0 &&
      parallel_.check_replicas(stats_.learner_steps)) {
    publish_weights(policy_, fleet_);  // repaired: actors act with rank 0's weights
  }
  return {.trained = true};
}

}  // namespace

std::unique_ptr<LearnerStep> make_cluster_step(const TrainOptions& options, PolicyTraining& policy,
                                               ActorFleet& fleet, RunStats& stats,
                                               const ControlBoard& board) {
  return std::make_unique<ClusterStepper>(options, policy, fleet, stats, board);
}

}  // namespace pronghorn::learner
