// Learner::Loop (learner.h): wiring between the parts of a learner, each
// owning its state:
//   fleet (actors, ring, batches) → step (alone or with other ranks; the
//   policy under training, publication) → schedule (checkpoints,
//   evaluations, the target) → reports (rates, health, metrics) and the
//   control inbox (requests, stops, the published status).
// Internal to learner/.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>

#include "learner/actor_fleet.h"
#include "learner/control_board.h"
#include "learner/control_inbox.h"
#include "learner/learner.h"
#include "learner/learner_step.h"
#include "learner/policy_training.h"
#include "learner/run_reports.h"
#include "learner/run_stats.h"
#include "learner/schedule.h"

namespace pronghorn::learner {

// One learner and its node's actors: setup, then run() until done.
class Learner::Loop {
 public:
  using Clock = std::chrono::steady_clock;

  Loop(const TrainOptions& o, ControlBoard& board, const std::atomic<bool>& stop);

  TrainResult run();
  // After run() threw: the run's last metrics line, saying so.
  void report_failure(const std::exception& error) noexcept;

 private:
  void resume();
  void start();
  std::optional<PreparedBatch> wait_for_batch();
  bool budget_spent() const {
    return stats_.env_steps >= static_cast<uint64_t>(o_.config.run.total_steps);
  }
  void report(Clock::time_point now);
  TrainResult finish(bool finished);
  v1::Status status() const;

  const TrainOptions o_;  // a copy: the caller's may be a temporary
  RunStats stats_;
  PolicyTraining policy_;  // before the fleet: its slab outlives the actors and nodes
  ActorFleet fleet_;
  std::unique_ptr<LearnerStep> step_;  // made once rank 0's state is known
  Schedule schedule_;
  RunReports reports_;
  ControlInbox control_;  // last: its board closes first
};

}  // namespace pronghorn::learner
