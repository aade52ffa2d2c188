// This rank's side of several learners' step (learner/learner_step.h,
// learner/data_parallel.h): rank 0's state on every rank at start, then one
// step of every rank together, each bringing its batch or none, its votes
// (stop, solved) and its status row. Internal to learner/.
#pragma once

#include <memory>

#include "learner/learner_step.h"

namespace pronghorn::learner {

std::unique_ptr<LearnerStep> make_cluster_step(const TrainOptions& options, PolicyTraining& policy,
                                               ActorFleet& fleet, RunStats& stats,
                                               const ControlBoard& board);

}  // namespace pronghorn::learner
