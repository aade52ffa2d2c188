// One learner step (docs/architecture.md §3): B unrolls from the ring → Batch
// [T+1, B·K] tensors → per minibatch of columns (or of single steps),
// learner.epochs times: model
// forward → V-trace (or GAE, once per batch) → fused loss → backward → clip →
// optimizer. The loop around it (taking, publishing,
// reporting) is learner.cpp's.
// Threads: one (the learner's loop).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "kernels/losses.h"
#include "kernels/vtrace.h"
#include "learner/batch.h"
#include "learner/return_scaling.h"
#include "model/policy_face.h"

namespace pronghorn::learner {

// The loss terms and gradient norm of one step, and where its time went.
// Over a batch's several optimizer steps (add()): the loss terms, clip
// fraction, KL estimate, gradient norm and learning rate are the steps'
// means, the times their sums.
struct StepStats {
  double total = 0, policy = 0, value = 0, entropy = 0, grad_norm = 0;
  // How far the trained policy has moved from the one that acted (policy
  // lag and the passes over the batch): the fraction of samples whose
  // π/μ lies outside 1 ± loss.ppo_clip, and the mean of (r − 1) − log r,
  // an estimate of KL(μ‖π).
  double clip_fraction = 0, approx_kl = 0;
  double forward_s = 0;  // model forward, V-trace or GAE, loss
  double backward_s = 0;
  double optimizer_s = 0;    // gradient clipping and the optimizer step
  double allreduce_s = 0;    // several learners: the gradients' all-reduce
  double learning_rate = 0;  // what the optimizer stepped with (learner.lr_schedule applied)
  int64_t optimizer_steps = 0;

  // One more optimizer step's stats into these.
  void add(const StepStats& step);
};
// The model and optimizer live on learner.device: "auto" is CUDA when
// LibTorch has it and a GPU is visible, else the CPU; "cuda" without one is an
// Error. Batches arrive on the CPU and move over in learn().
class Trainer {
 public:
  Trainer(const Config& config, const EnvSpec& spec);

  at::Device device() const { return device_; }
  PolicyNet& model() { return policy_.model(); }
  TrainingPolicy& policy() { return policy_; }
  std::string optimizer_state();
  void load_optimizer_state(const std::string& state);
  // loss.return_scaling's running statistics; null when it is off.
  ReturnScaler* return_scaler() { return return_scaler_ ? &*return_scaler_ : nullptr; }
  // model.normalize_observations' running statistics (float64), taken in
  // from each batch by start_batch() before its forward passes, the model's
  // float32 copy set from them; null when it is off.
  const ObservationStats* observation_stats() const {
    return observation_stats_ ? &*observation_stats_ : nullptr;
  }
  // A checkpoint's statistics, into both (resume). Throws Error when the
  // model does not normalise or their size is not its observations'.
  void restore_observation_stats(const ObservationStats& stats);
  // Several learners (learner/data_parallel.h): the moments of `batch`'s
  // observations, and every rank's taken in, in rank order, before
  // start_batch(batch, ObservationUpdate::kMerged).
  ObservationMoments observation_moments(const Batch& batch) const;
  void merge_observation_moments(const std::vector<ObservationMoments>& ranks);

  // Every optimizer step of `batch` (learner.epochs × learner.minibatches);
  // `progress` in [0, 1] drives the LR schedule. Returns their stats, add()ed.
  StepStats learn(const Batch& batch, double progress);

  // learn() in parts, so that several learners can sum their gradients
  // between backward and apply (learner/data_parallel.h):
  // start_batch(batch), then for each step in [0, steps_per_batch()):
  // backward_step(step), (all-reduce), apply().
  //
  // Takes the batch onto the device and plans its steps: epoch e's
  // minibatches are the consecutive slices of a fresh permutation of the
  // N = B·K columns, or with learner.shuffle = "steps" of the T·N steps
  // (drawn from run.seed's generator; with one minibatch they stay in
  // order). PPO on GAE computes its advantages and returns here, once, from
  // a no-grad forward of the whole batch; V-trace is recomputed in each
  // backward_step() from the model as it is then.
  // With model.normalize_observations the statistics take the batch's
  // observations in first, unless several learners merged them already.
  enum class ObservationUpdate { kFromBatch, kMerged };
  void start_batch(const Batch& batch, ObservationUpdate update = ObservationUpdate::kFromBatch);
  int64_t epochs() const { return epochs_; }
  int64_t steps_per_batch() const { return epochs_ * minibatches_; }
  // What step `step` of the started batch trains on, int64 on the device:
  // [N / minibatches] columns, or [T·N / minibatches] steps t·N + n.
  const at::Tensor& minibatch(int64_t step) const;
  // Forward, loss and backward of one step of the started batch.
  StepStats backward_step(int64_t step);

  // Forward, loss and backward on all of `batch` (no plan): the gradients
  // are left in the parameters' .grad, not applied. A non-finite loss is
  // apply()'s to refuse: several learners must still make their all-reduce
  // first.
  StepStats backward(const Batch& batch);
  // Clips the gradients to learner.max_grad_norm (the norm of all of them),
  // checks them finite and takes one optimizer step; fills s.grad_norm,
  // s.learning_rate and s.optimizer_s. Throws Error, leaving the weights,
  // when they are not finite.
  void apply(StepStats& s, double progress);

 private:
  Batch on_device(const Batch& cpu) const;
  PolicyOutput forward(const Batch& b);  // [(T+1)·N] rows
  // The advantages and value targets ([T, N]) of `b` from the network's
  // outputs on it (values [T+1, N]): GAE(λ) and its returns, or V-trace's.
  std::pair<at::Tensor, at::Tensor> advantages_of(const Batch& b, const PolicyOutput& out,
                                                  const at::Tensor& values);
  // Forward, loss and backward on `b`, whose advantages and value targets
  // are given ([T, N]) or, undefined, computed from this forward; old_values
  // [T, N] (or undefined) are what loss.value_clip clips against.
  StepStats backward_on(const Batch& b, at::Tensor advantages, at::Tensor targets,
                        const at::Tensor& old_values = {});
  StepStats backward_on_steps(const at::Tensor& steps);  // of the started batch
  // The network's outputs for the loss, [T, N] steps ([1, M] for M single
  // steps): logits or Gaussian means [T, N, A], the log-std [T, N, D]
  // (Gaussian, else undefined), values.
  struct HeadOutputs {
    at::Tensor head, log_std, values;
  };
  // The loss of those outputs (advantages normalised first when
  // loss.normalize_advantages) and its backward.
  StepStats loss_backward(const HeadOutputs& o, const at::Tensor& actions,
                          const at::Tensor& behaviour_log_probs, at::Tensor advantages,
                          const at::Tensor& targets, const at::Tensor& old_values);

  Config c_;
  at::Device device_;
  TrainingPolicy policy_;  // the model and its optimizer
  bool continuous_;        // Gaussian head
  bool use_gae_;           // PPO on GAE(λ) advantages instead of V-trace
  kernels::VtraceParams vtrace_params_;
  kernels::LossOptions loss_options_;
  const int64_t epochs_, minibatches_;
  const bool shuffle_steps_;          // learner.shuffle = "steps"
  at::Generator permutations_;        // run.seed's, CPU
  const bool batch_advantage_stats_;  // loss.advantage_stats = "batch" (and normalising)
  std::optional<ReturnScaler> return_scaler_;
  std::optional<ObservationStats> observation_stats_;
  // The started batch: on the device, its GAE advantages and returns when
  // computed once ([T, N], else undefined), and each step's minibatch.
  Batch batch_;
  at::Tensor batch_advantages_, batch_targets_;
  at::Tensor batch_values_;  // [T, N] the values of that forward (loss.value_clip's V₀)
  // loss.advantage_stats = "batch": the mean and population std of the
  // batch's advantages under that forward (0-dim; undefined otherwise).
  at::Tensor advantage_mean_, advantage_std_;
  std::vector<at::Tensor> minibatches_of_;
  double start_s_ = 0;  // start_batch's time, counted in the first step's forward_s
};

}  // namespace pronghorn::learner
