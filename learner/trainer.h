// One learner step (docs/architecture.md §3): B unrolls from the ring → Batch
// [T+1, B·K] tensors → model forward → V-trace (or GAE) → fused loss →
// backward → clip → optimizer. The loop around it (taking, publishing,
// reporting) is learner.cpp's.
// Threads: one (the learner's loop).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "kernels/losses.h"
#include "kernels/vtrace.h"
#include "learner/batch.h"
#include "model/policy.h"

namespace pronghorn::learner {

// The loss terms and gradient norm of one step, and where its time went.
struct StepStats {
  double total = 0, policy = 0, value = 0, entropy = 0, grad_norm = 0;
  double forward_s = 0;  // model forward, V-trace or GAE, loss
  double backward_s = 0;
  double optimizer_s = 0;    // gradient clipping and the optimizer step
  double learning_rate = 0;  // what the optimizer stepped with (learner.lr_schedule applied)
};

// The model and optimizer live on learner.device: "auto" is CUDA when
// LibTorch has it and a GPU is visible, else the CPU; "cuda" without one is an
// Error. Batches arrive on the CPU and move over in learn().
class Trainer {
 public:
  Trainer(const Config& config, const EnvSpec& spec);

  at::Device device() const { return device_; }
  PolicyNet& model() { return model_; }
  std::string optimizer_state();
  void load_optimizer_state(const std::string& state);

  // One optimizer step on `batch`; `progress` in [0, 1] drives the LR schedule.
  StepStats learn(const Batch& batch, double progress) {
    StepStats s = backward(batch);
    apply(s, progress);
    return s;
  }

  // The two halves of learn(), apart so that several learners can sum their
  // gradients between them (learner/data_parallel.h).
  // Forward, loss and backward: the gradients are left in the parameters'
  // .grad, not applied. A non-finite loss is apply()'s to refuse:
  // several learners must still make their all-reduce first.
  StepStats backward(const Batch& batch);
  // Clips the gradients to learner.max_grad_norm (the norm of all of them),
  // checks them finite and takes one optimizer step; fills s.grad_norm,
  // s.learning_rate and s.optimizer_s. Throws Error, leaving the weights,
  // when they are not finite.
  void apply(StepStats& s, double progress);

 private:
  Batch on_device(const Batch& cpu) const;

  Config c_;
  at::Device device_;
  PolicyNet model_;
  bool continuous_;  // Gaussian head
  bool use_gae_;     // PPO on GAE(λ) advantages instead of V-trace
  kernels::VtraceParams vtrace_params_;
  kernels::LossOptions loss_options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace pronghorn::learner
