// The lone learner's step (learner/learner_step.h), and the choice between
// it and several learners' (learner/cluster_step.cpp).
#include "core/clock.h"
#include "learner/cluster_step.h"
#include "learner/learner_step.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;

class LoneStep final : public LearnerStep {
 public:
  LoneStep(const Config& config, PolicyTraining& policy, ActorFleet& fleet, RunStats& stats)
      : c_(config),
        samples_(fleet.batch_env_steps()),
        policy_(policy),
        fleet_(fleet),
        stats_(stats) {}

  std::chrono::milliseconds batch_wait() const override { return 100ms; }
  bool stops_alone() const override { return true; }

  StepOutcome take(std::optional<PreparedBatch>& prepared, const StepVotes&,
                   const std::function<bool()>& solved) override {
    if (!prepared) return {};
    learn(*prepared);
    reached_ = solved();  // the step may have moved the training mean off the target
    return {.trained = true};
  }
  bool reached_target() const override { return reached_; }

  void finish(std::optional<PreparedBatch> left, bool finished) override {
    if (!left) return;
    if (finished) {
      stats_.untrained_unrolls += left->unrolls;
    } else {
      learn(*left);
    }
  }
  void describe(LiveState&) const override {}
  void complete(TrainResult&) const override {}

 private:
  void learn(PreparedBatch& prepared) {
    StageTimes& times = stats_.stage_time;
    times.learner_batch_s += prepared.batch_s;
    const double progress = static_cast<double>(stats_.env_steps) / c_.run.total_steps;
    const StepStats step = policy_.trainer().learn(prepared.batch, progress);
    times.learner_publish_s += publish_weights(policy_, fleet_);
    stats_.add(prepared.batch, step, prepared.unrolls, samples_);
    stats_.local_env_steps += samples_;
  }

  const Config& c_;
  const uint64_t samples_;  // env steps in a batch
  PolicyTraining& policy_;
  ActorFleet& fleet_;
  RunStats& stats_;
  bool reached_ = false;
};

}  // namespace

double publish_weights(PolicyTraining& policy, ActorFleet& fleet) {
  const auto start = SteadyClock::now();
  fleet.set_version(policy.publish());
  return seconds_since(start);
}

std::unique_ptr<LearnerStep> make_learner_step(const TrainOptions& options, PolicyTraining& policy,
                                               ActorFleet& fleet, RunStats& stats,
                                               const ControlBoard& board) {
  if (options.collective) return make_cluster_step(options, policy, fleet, stats, board);
  return std::make_unique<LoneStep>(options.config, policy, fleet, stats);
}

}  // namespace pronghorn::learner
