#include "learner/policy_training.h"

#include <torch/torch.h>

#include "learner/checkpoint_model.h"

namespace pronghorn::learner {

PolicyTraining::PolicyTraining(const Config& config, const EnvSpec& spec)
    : trainer_(config, spec), flat_(static_cast<size_t>(trainer_.model()->published_count())) {}

void PolicyTraining::create_slab(const std::string& slab_name) {
  slab_name_ = slab_name;
  slab_ = buffer::WeightSlab::create(slab_name, trainer_.model()->published_count());
}

uint64_t PolicyTraining::publish() {
  trainer_.model()->write_published(flat_.data());
  if (const ObservationStats* stats = trainer_.observation_stats()) published_stats_ = *stats;
  version_ = slab_->publish(flat_.data());
  return version_;
}

Checkpoint PolicyTraining::snapshot(uint64_t env_steps, uint64_t learner_steps, uint64_t episodes) {
  Checkpoint ck;
  ck.counters = {env_steps, learner_steps, episodes, version_};
  ck.parameters.assign(flat_.begin(), flat_.begin() + trainer_.model()->parameter_count());
  ck.parameter_layout = parameter_layout(*trainer_.model());
  ck.optimizer = trainer_.optimizer_state();
  at::Tensor state = at::detail::getDefaultCPUGenerator().get_state();
  ck.rng.assign(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()), state.numel());
  if (const ReturnScaler* scaler = trainer_.return_scaler()) ck.return_stats = scaler->stats();
  if (trainer_.observation_stats()) ck.observation_stats = published_stats_;
  return ck;
}

}  // namespace pronghorn::learner
