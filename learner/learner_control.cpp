// Learner::Loop's side of the control plane (docs/architecture.md §4): the
// requests the ControlBoard hands over between learner steps, the status it
// publishes, and the actor-only nodes' share of both.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "learner/learner_loop.h"

namespace pronghorn::learner {

// Carries out one request of the control plane, between learner steps.
void Learner::Loop::handle(ControlBoard::Pending& pending) {
  const ControlRequest& r = pending.request;
  ControlReply reply;
  try {
    switch (r.kind) {
      case ControlRequest::Kind::kScaleActors:
        if (!r.node.empty()) {
          scale_remote_node(r, reply);
          break;
        }
        reply.previous_actors = supervisor_->desired();
        supervisor_->scale(r.actors, r.oversubscribe || c_.actor.oversubscribe);
        reply.actors = supervisor_->desired();
        spdlog::info("actors scaled from {} to {}", reply.previous_actors, reply.actors);
        break;
      case ControlRequest::Kind::kSaveCheckpoint:
        if (rank_ != 0)
          throw UsageError("checkpoints are written by rank 0: ask its control plane");
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
    reply.refused = dynamic_cast<const UsageError*>(&e) != nullptr;  // a scale past the cap
  }
  publish_status();  // before the reply: a caller's next GetStatus sees the change
  pending.reply(reply);
}

v1::Status Learner::Loop::status() const {
  LiveState live{
      .run_name = c_.run.name,
      .run_dir = run_dir_absolute_,
      .env_name = spec_.name,
      .config_digest = config_digest_,
      .uptime_s = elapsed(),
      .policy_version = version_,
      .ring_slots = static_cast<uint32_t>(c_.learner.ring_slots),
      .ring = ring_->counters(),
      .stopping = stop_requested_ || stop_.load(),
      .rank = static_cast<uint32_t>(rank_),
      .world_size = static_cast<uint32_t>(parallel_ ? parallel_->world_size() : 1),
      .node_name = o_.node_name,
      .ranks = rank_rows_,
      .remote_nodes = remote_rows_,
      .remote_address = remote_ ? remote_->address() : "",
      .total_steps = static_cast<uint64_t>(c_.run.total_steps),
      .target_return = target_,
      .state = state_ == "running" && (stop_requested_ || stop_.load()) ? "stopping" : state_,
      .end_reason = end_reason_,
      .health = health_line_};
  if (supervisor_) {
    live.actors_alive = supervisor_->alive();
    live.actors_desired = supervisor_->desired();
    live.actor_restarts = supervisor_->restarts();
  }
  return make_status(stats_, live);
}

// A clean end tells the nodes the job is over (they exit 0); each node's
// unrolls are logged, for a user (and the tests) to set against the node's own count.
void Learner::Loop::end_remote_actors(bool job_ended) {
  if (!remote_) return;
  if (job_ended) remote_->end_job();
  for (const v1::RemoteNode& node : remote_->nodes()) {
    spdlog::info("remote node {}: {} unrolls over {} sessions ({} disconnects)", node.name(),
                 node.unrolls(), node.sessions(), node.disconnects());
  }
}

// `scale --node NAME`: an actor-only node of this learner.
void Learner::Loop::scale_remote_node(const ControlRequest& r, ControlReply& reply) {
  if (!remote_ || !remote_->scale(r.node, r.actors)) {
    throw UsageError(fmt::format("no actor-only node named {} joined this learner", r.node));
  }
  reply.actors = r.actors;
  spdlog::info("actor-only node {} asked for {} actors", r.node, r.actors);
}

}  // namespace pronghorn::learner
