// The training half of the policy face (model/policy_face.h): forward,
// gradient clipping and the optimizer step, each through the fused code
// (model/fast_mlp_train.h, fast_clip.h, fast_adam.h) or LibTorch's.
#include <torch/torch.h>

#include "core/error.h"
#include "model/fast_adam.h"
#include "model/fast_clip.h"
#include "model/fast_mlp_train.h"
#include "model/policy_face.h"

namespace pronghorn {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(PolicyNetImpl& model,
                                                        const LearnerConfig& c) {
  const double lr = c.learning_rate;
  if (c.optimizer == LearnerConfig::Optimizer::kRmsprop) {
    return std::make_unique<torch::optim::RMSprop>(
        model.parameters(),
        torch::optim::RMSpropOptions(lr).alpha(c.rmsprop_alpha).eps(c.adam_eps));
  }
  return std::make_unique<torch::optim::Adam>(model.parameters(),
                                              torch::optim::AdamOptions(lr).eps(c.adam_eps));
}

}  // namespace

TrainingPolicy::TrainingPolicy(PolicyNet model, at::Device device, const ModelConfig& model_config,
                               const LearnerConfig& learner)
    : model_(std::move(model)),
      fused_(model_config.fast_path == ModelConfig::FastPath::kAuto),
      mode_(model_config.fast_path) {
  model_->to(device);  // before the optimizer takes its parameters
  optimizer_ = make_optimizer(*model_, learner);
}

TrainingPolicy::~TrainingPolicy() = default;

// A recurrent core runs through the S steps from the stored state; a
// feed-forward model runs all S·N rows at once, through the fused MLP where
// it applies. That is judged on the observations as stored: an MLP over uint8
// pixels stays on LibTorch.
PolicyOutput TrainingPolicy::forward(const at::Tensor& obs, const at::Tensor& core_state,
                                     const at::Tensor& ended) {
  if (!model_->recurrent()) {
    const at::Tensor rows = obs.flatten(0, 1);
    const at::Tensor input = preprocess_observations(rows, *model_);
    if (fused_training_applies(*model_, rows, mode_)) return fused_forward(*model_, input);
    return model_->forward(input);
  }
  PRONGHORN_CHECK(core_state.defined(),
                  "learner step: a recurrent model needs the batch's core_state");
  CoreState core{core_state[0], core_state[1]};
  return model_->forward_sequence(preprocess_observations(obs, *model_), core, ended);
}

void TrainingPolicy::zero_grad() { optimizer_->zero_grad(); }

double TrainingPolicy::clip_gradients(double max_norm) {
  return fused_ ? fused_clip_grad_norm(model_->parameters(), max_norm)
                : torch::nn::utils::clip_grad_norm_(model_->parameters(), max_norm);
}

// Adam in one pass per tensor on the fused path (model/fast_adam.h), on
// LibTorch's optimizer state either way.
void TrainingPolicy::step(double learning_rate) {
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(learning_rate);
  auto* adam = dynamic_cast<torch::optim::Adam*>(optimizer_.get());
  if (adam != nullptr && fused_) {
    fused_adam_step(*adam);
  } else {
    optimizer_->step();
  }
}

}  // namespace pronghorn
