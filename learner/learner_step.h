// The learner's step, alone or with every rank of several learners
// (docs/architecture.md §2, §3): a batch (or none) → the trainer's optimizer
// steps (with the all-reduce for several) → the weights published once.
// Chosen once when the job starts (make_learner_step), so the loop never asks
// which.
// Threads: one (the learner's loop).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "learner/actor_fleet.h"
#include "learner/batch_prefetcher.h"
#include "learner/learner.h"
#include "learner/policy_training.h"
#include "learner/run_stats.h"
#include "learner/run_status.h"

namespace pronghorn::learner {

// What this rank brings to a step besides its batch.
struct StepVotes {
  bool stop = false;      // asked to stop (a signal, `pronghorn stop`)
  bool stop_now = false;  // and without a checkpoint (`stop --now`)
};

// What a step did.
struct StepOutcome {
  bool trained = false;   // weights moved and were published
  bool leave = false;     // every rank leaves the loop here (a stop was voted)
  bool stop_now = false;  // then: some rank's stop was `stop --now`
};

class LearnerStep {
 public:
  virtual ~LearnerStep() = default;
  // How long the loop waits for a batch before stepping without one.
  virtual std::chrono::milliseconds batch_wait() const = 0;
  // Whether it keeps a batch it could not train yet (several learners under
  // run.deterministic wait for every rank's): the loop takes no other then.
  virtual bool holds_batch() const { return false; }
  // Whether a stop asked here ends the loop before the next step; false: it
  // is voted in the next step, which every rank leaves together.
  virtual bool stops_alone() const = 0;
  // One step on `prepared` (nothing: no batch came in time). `solved` says
  // whether this rank's evaluation and training mean are at the target: a
  // lone learner asks it after its step (which may have moved the mean),
  // several ask it before, to vote.
  virtual StepOutcome take(std::optional<PreparedBatch>& prepared, const StepVotes& votes,
                           const std::function<bool()>& solved) = 0;
  // Whether the run reached its target, as of the last step.
  virtual bool reached_target() const = 0;
  // After the loop: the batch prepared when it ended. A lone learner that
  // stopped (not `finished`) trains on it, so that a resume goes on from
  // there; otherwise its unrolls are counted untrained.
  virtual void finish(std::optional<PreparedBatch> left, bool finished) = 0;
  // Into a status, and into the run's result.
  virtual void describe(LiveState& live) const = 0;
  virtual void complete(TrainResult& result) const = 0;
};

// The time publishing took, in seconds: the policy's weights as the slab's
// next version, and the version batches are judged against from then on.
double publish_weights(PolicyTraining& policy, ActorFleet& fleet);

// The lone learner's step, or (options.collective set) this rank's side of
// several learners': the latter first takes rank 0's state (weights,
// optimizer, counters) and may throw UsageError when the job's shape does
// not fit the collective.
std::unique_ptr<LearnerStep> make_learner_step(const TrainOptions& options, PolicyTraining& policy,
                                               ActorFleet& fleet, RunStats& stats,
                                               const ControlBoard& board);

}  // namespace pronghorn::learner
