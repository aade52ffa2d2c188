// Learner::Loop's side of several learners (docs/architecture.md §2): rank
// 0's state on every rank at start, and the step every rank takes together.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "core/error.h"
#include "learner/learner_loop.h"

namespace pronghorn::learner {

using loop_time::seconds;

// Rank 0's weights, optimizer state and counters (fresh or resumed) on every rank.
void Learner::Loop::share_initial_state() {
  // The all-reduce counts samples in floats, exact below 2^24; every rank has
  // the same config, so every rank refuses here together.
  const double step_samples = static_cast<double>(T_ * K_ * B_) * o_.collective->world_size();
  if (step_samples >= (1 << 24)) {
    throw UsageError(fmt::format(
        "actor.unroll_length × env.num_envs × learner.batch_size × world size = {:.0f} samples "
        "a step; several learners count at most 2^24 (16777216)",
        step_samples));
  }
  parallel_.emplace(*o_.collective, trainer_, c_.loss.reduction == LossConfig::Reduction::kMean);
  RunCounters counters{stats_.env_steps, stats_.learner_steps, stats_.episodes, slab_->version()};
  parallel_->share_initial_state(counters);
  stats_.env_steps = counters.env_steps;
  stats_.learner_steps = counters.learner_steps;
  stats_.episodes = counters.episodes;
  slab_->set_version(counters.policy_version);
  spdlog::info("rank {} of {}: starting from rank 0's state ({} env steps, policy version {})",
               rank_, parallel_->world_size(), counters.env_steps, counters.policy_version);
}

// One batch of every rank together (data_parallel.h): per optimizer step,
// this rank's gradients (none without a batch), the all-reduce, and the same
// optimizer step everywhere; the weights published once after the last.
// Counters advance by the cluster's samples.
ClusterStep Learner::Loop::learn_together(std::optional<PreparedBatch>& prepared) {
  if (prepared) stats_.stage_time.learner_batch_s += prepared->batch_s;
  const uint64_t samples = prepared ? static_cast<uint64_t>(T_ * K_ * B_) : 0;
  // Rank 0 evaluates: its evaluation reaching the target stops every rank.
  const bool target_here = eval_reached_target_ && training_at_target();
  RankRow row{.sps = stats_.local_sps,
              .allreduce_s = stats_.last_allreduce_s,
              .local_env_steps = stats_.local_env_steps,
              .actors_alive = static_cast<uint32_t>(supervisor_->alive()),
              .actors_desired = static_cast<uint32_t>(supervisor_->desired()),
              .ring_occupancy = static_cast<uint32_t>(ring_->counters().ready),
              .control_port = static_cast<uint32_t>(board_.control_port())};
  StepStats step;
  ClusterStep cluster =
      parallel_->learn(prepared ? &prepared->batch : nullptr,
                       {.stop = stop_.load() || stop_requested_,
                        .stop_now = stop_requested_ && !checkpoint_at_stop_,
                        .target = target_here,
                        .target_return = target_here ? stats_.eval_return_mean : 0.0,
                        .row = row},
                       static_cast<double>(stats_.env_steps) / c_.run.total_steps, step);
  if (rank_ == 0) rank_rows_ = make_rank_rows(cluster.rows, o_.rank_nodes, o_.rank_hosts);
  stats_.stage_time.learner_allreduce_s += step.allreduce_s;
  stats_.last_allreduce_s = step.allreduce_s;
  if (cluster.samples == 0) return cluster;  // nobody had a batch: no step anywhere
  const auto publish_start = Clock::now();
  trainer_.model()->write_flat(flat_.data());
  version_ = slab_->publish(flat_.data());
  prefetcher_->set_version(version_);
  stats_.stage_time.learner_publish_s += seconds(Clock::now() - publish_start);
  stats_.add(prepared ? prepared->batch : Batch{}, step, prepared ? prepared->unrolls : 0,
             cluster.samples);
  stats_.local_env_steps += samples;
  const int64_t interval = c_.distributed.check_interval_steps;
  if (interval > 0 && stats_.learner_steps % static_cast<uint64_t>(interval) == 0 &&
      parallel_->check_replicas(stats_.learner_steps)) {
    trainer_.model()->write_flat(flat_.data());  // repaired: actors act with rank 0's weights
    version_ = slab_->publish(flat_.data());
    prefetcher_->set_version(version_);
  }
  return cluster;
}

}  // namespace pronghorn::learner
