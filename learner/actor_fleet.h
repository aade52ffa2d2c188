// A learner's actors and what they write (docs/architecture.md §2): the ring,
// this node's actor processes (fleet/supervisor.h), the actor-only nodes that
// joined (learner/remote_actors.h), and the batches taken from the ring
// (learner/batch_prefetcher.h).
//   actors, nodes → ring → prefetcher → next_batch()
// Destroyed in the order that keeps every writer off a gone ring: the nodes'
// gateway, the prefetcher, the actors, then the ring.
// Threads: one (the learner's loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "fleet/supervisor.h"
#include "learner/batch_prefetcher.h"
#include "learner/control_board.h"
#include "learner/learner.h"
#include "learner/remote_actors.h"
#include "learner/run_status.h"

namespace pronghorn::learner {

class ActorFleet {
 public:
  // Removes dead owners' shared memory, then creates the ring `ring_name`
  // for the job's unrolls. Checks the initial actor count against what this
  // node holds (UsageError): nothing has started then.
  ActorFleet(const TrainOptions& options, std::string ring_name);

  // Starts the actors (reading the weights of `slab`, `version` published),
  // the prefetcher and, where configured, the actor-only nodes' gateway.
  void start(const std::string& slab_name, const buffer::WeightSlab& slab, uint64_t version,
             int seed_rank);

  // Watches the actors (restarts, output); throws pronghorn::Error when they
  // keep failing (fleet/actor_watchdog.h); not stalled while `learner_waits`
  // (Supervisor::poll). Every 100 ms or more, refreshes the nodes' rows.
  void poll(bool learner_waits = false);
  // The job is stopping: actors that end are not restarted
  // (Supervisor::hold_restarts).
  void hold_restarts();
  // The next prepared batch, or nothing within `wait`.
  std::optional<PreparedBatch> next_batch(std::chrono::milliseconds wait);
  // The policy version batches are judged against from now on.
  void set_version(uint64_t version) { prefetcher_->set_version(version); }
  // Stops taking batches; returns the one prepared, whose unrolls left the ring.
  std::optional<PreparedBatch> stop_taking() { return prefetcher_->stop(); }
  // `scale`, of this node's actors or of an actor-only node's (`r.node`).
  void scale(const ControlRequest& r, ControlReply& reply);
  // The job is over: the nodes told so (they exit 0) and their unrolls
  // logged; the actors stopped.
  void end();

  // Into a status: the ring, the actors, the nodes.
  void describe(LiveState& live) const;
  RankRow row() const;  // this rank's actors and ring, for rank 0's status
  // A line while actors fail more and more ("" otherwise), for the health line.
  std::string crash_rate_warning() const;
  uint64_t restarts() const { return supervisor_ ? supervisor_->restarts() : 0; }
  int desired() const { return supervisor_ ? supervisor_->desired() : 0; }
  int initial_actors() const { return initial_actors_; }
  // The env steps of one batch of the ring's unrolls: T × K × learner.batch_size.
  uint64_t batch_env_steps() const {
    return static_cast<uint64_t>(unroll_.T * unroll_.K * o_.config.learner.batch_size);
  }

 private:
  Lockstep lockstep() const;  // run.deterministic's, or off

  const TrainOptions& o_;
  const int initial_actors_;
  const std::string ring_name_;
  const buffer::UnrollSpec unroll_;  // the ring's slots
  std::unique_ptr<buffer::Ring> ring_;
  std::optional<fleet::Supervisor> supervisor_;
  std::optional<BatchPrefetcher> prefetcher_;
  std::unique_ptr<RemoteActors> remote_;     // destroyed first: it writes into the ring
  std::vector<v1::RemoteNode> remote_rows_;  // as of the last refresh
  std::chrono::steady_clock::time_point rows_at_;
};

}  // namespace pronghorn::learner
