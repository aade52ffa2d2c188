#include "learner/actor_fleet.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "core/error.h"
#include "fleet/actor_capacity.h"
#include "fleet/actor_command.h"
#include "fleet/priority.h"
#include "fleet/stale_segments.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<buffer::Ring> create_ring(const std::string& name, const buffer::UnrollSpec& spec,
                                          int64_t slots) {
  fleet::remove_stale_segments();
  return buffer::Ring::create(name, spec, static_cast<uint32_t>(slots));
}

}  // namespace

ActorFleet::ActorFleet(const TrainOptions& options, std::string ring_name)
    : o_(options),
      initial_actors_(fleet::initial_actor_count(o_.config.actor)),
      ring_name_(std::move(ring_name)),
      unroll_(buffer::unroll_spec_for(o_.env, o_.config)),
      ring_(create_ring(ring_name_, unroll_, o_.config.learner.ring_slots)) {
  if (const int64_t b = o_.config.learner.batch_size;
      o_.config.run.deterministic && b % initial_actors_ != 0) {
    throw UsageError(fmt::format(
        "run.deterministic = true: learner.batch_size = {} must be a multiple of the {} actor{} "
        "(each batch takes as many unrolls from every actor)",
        b, initial_actors_, initial_actors_ == 1 ? "" : "s"));
  }
}

Lockstep ActorFleet::lockstep() const {
  if (!o_.config.run.deterministic) return {};
  return {.actors = static_cast<uint32_t>(initial_actors_),
          .unrolls = static_cast<uint32_t>(o_.config.learner.batch_size / initial_actors_)};
}

void ActorFleet::start(const std::string& slab_name, const buffer::WeightSlab& slab,
                       uint64_t version, int seed_rank) {
  const Config& c = o_.config;
  // Several ranks: every learner step waits on each rank's learner (fleet/priority.h).
  const int nice = fleet::actor_nice(c.actor, /*cluster=*/o_.collective != nullptr);
  supervisor_.emplace(fleet::actor_process_args({.ring = ring_name_,
                                                 .slab = slab_name,
                                                 .config_path = o_.run_dir + "/config.toml",
                                                 .parent = getpid(),
                                                 .seed_rank = static_cast<uint32_t>(seed_rank),
                                                 .lockstep_unrolls = lockstep().unrolls,
                                                 .nice = nice}),
                      initial_actors_,
                      fleet::SupervisorOptions{.limits = fleet::watchdog_limits(c.actor)});
  prefetcher_.emplace(*ring_, o_.env, c, version, lockstep());
  if (o_.remote_actors) remote_ = o_.remote_actors(*ring_, slab, to_toml(c));
}

void ActorFleet::hold_restarts() {
  if (supervisor_) supervisor_->hold_restarts();
}

void ActorFleet::poll(bool learner_waits) {
  // Throws when actors keep failing.
  supervisor_->poll(ring_->counters().committed, learner_waits);
  if (o_.config.run.deterministic && supervisor_->restarts() > 0) {
    throw Error(
        "run.deterministic = true: an actor died and was restarted, and its unrolls would not be "
        "the ones a run with this seed makes; the job ends (its checkpoints stand; --resume "
        "continues it, not bit for bit)");
  }
  if (!remote_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - rows_at_ >= 100ms) {  // fresh while nothing trains, too
    remote_rows_ = remote_->nodes();
    rows_at_ = now;
  }
}

std::optional<PreparedBatch> ActorFleet::next_batch(std::chrono::milliseconds wait) {
  return prefetcher_->next(wait);
}

void ActorFleet::scale(const ControlRequest& r, ControlReply& reply) {
  if (!r.node.empty()) {  // `scale --node NAME`: an actor-only node of this learner
    if (!remote_ || !remote_->scale(r.node, r.actors)) {
      throw UsageError(fmt::format("no actor-only node named {} joined this learner", r.node));
    }
    reply.actors = r.actors;
    spdlog::info("actor-only node {} asked for {} actors", r.node, r.actors);
    return;
  }
  if (o_.config.run.deterministic) {
    throw UsageError(fmt::format(
        "run.deterministic = true: this job's {} actors are fixed (every batch takes unrolls from "
        "each of them)",
        initial_actors_));
  }
  reply.previous_actors = supervisor_->desired();
  supervisor_->scale(r.actors, r.oversubscribe || o_.config.actor.oversubscribe);
  reply.actors = supervisor_->desired();
  spdlog::info("actors scaled from {} to {}", reply.previous_actors, reply.actors);
}

// A clean end tells the nodes the job is over (they exit 0); each node's
// unrolls are logged, for a user (and the tests) to set against the node's
// own count.
void ActorFleet::end() {
  if (remote_) {
    remote_->end_job();
    for (const v1::RemoteNode& node : remote_->nodes()) {
      spdlog::info("remote node {}: {} unrolls over {} sessions ({} disconnects)", node.name(),
                   node.unrolls(), node.sessions(), node.disconnects());
    }
  }
  if (supervisor_) supervisor_->stop();
}

void ActorFleet::describe(LiveState& live) const {
  live.ring_slots = static_cast<uint32_t>(o_.config.learner.ring_slots);
  live.ring = ring_->counters();
  live.remote_nodes = remote_rows_;
  live.remote_address = remote_ ? remote_->address() : "";
  if (supervisor_) {
    live.actors_alive = supervisor_->alive();
    live.actors_desired = supervisor_->desired();
    live.actor_restarts = supervisor_->restarts();
  }
}

RankRow ActorFleet::row() const {
  return {.actors_alive = static_cast<uint32_t>(supervisor_->alive()),
          .actors_desired = static_cast<uint32_t>(supervisor_->desired()),
          .ring_occupancy = static_cast<uint32_t>(ring_->counters().ready)};
}

std::string ActorFleet::crash_rate_warning() const {
  return supervisor_ ? supervisor_->crash_rate_warning() : "";
}

}  // namespace pronghorn::learner
