// The policy as everything outside model/ runs it: one face with an inference
// half (actors, evaluation) and a training half (the learner's step). Behind
// it, and nowhere else, the fused MLP code (model/fast_mlp*.h, fast_adam.h,
// fast_clip.h) or LibTorch's PolicyNet is chosen, once, from model.fast_path,
// the model (an MLP on float32 vectors, no recurrent core, one torso for both
// heads) and the device (the CPU): callers never ask which.
//
//   inference: obs [K, obs...] (the env's dtype) → preprocessing → network →
//              sampled actions, behaviour log-probs [K]; values [K]; a
//              recurrent core's state [K, H] carried per env
//   training:  obs [S, N, obs...] → preprocessing → network (differentiable)
//              → logits and values [S·N]; then clip the gradients, step the
//              optimizer (Adam or RMSProp, learner.optimizer)
//
// Both paths use the same parameters in the same order (parameter_list()), so
// weights travel as one flat float32 vector and checkpoints are the same
// whichever path trained them. docs/architecture.md §3.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "model/policy.h"
#include "model/sampling.h"

namespace torch::optim {
class Optimizer;
}

namespace pronghorn {

class FastMlp;

// One parameter of the flat vector: its name as LibTorch's named_parameters()
// gives it ("torso.0.weight", "policy.bias", "log_std"), its shape, and where
// it starts, in floats. In the flat vector's order: what checkpoints and an
// export read to name the numbers.
struct ParameterEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // floats before it in the flat vector
  int64_t numel = 0;
};
std::vector<ParameterEntry> parameter_list(PolicyNetImpl& model);

// Observations as the network takes them: uint8 pixels scaled to [0, 1]
// (x / 255, float32); float32 normalised by the model's observation
// statistics where it holds them (model/observation_norm.h), else as given.
// [N, obs...] → [N, obs...]. The one place for preprocessing: both halves,
// both paths.
at::Tensor preprocess_observations(const at::Tensor& obs, const PolicyNetImpl& model);

// The inference half: K envs acting, one observation each per step. One
// object per thread (act() and values() write its buffers); LibTorch's work
// runs in inference mode.
//
// Random numbers: the fused path draws from a std::mt19937_64 of its own,
// seeded with `seed`; LibTorch's from its default generator, which the caller
// seeds (the actor with the same seed). Same seed, same path: same actions.
class InferencePolicy {
 public:
  // Acts with `model` (its weights as they are now; load() replaces them),
  // for `rows` envs of `env`. The fused path where `mode` is auto and the
  // model is an MLP over float32 vectors on the CPU; else LibTorch, on
  // `model` itself.
  InferencePolicy(PolicyNet model, const EnvSpec& env, int64_t rows, ModelConfig::FastPath mode,
                  uint64_t seed);
  ~InferencePolicy();
  InferencePolicy(const InferencePolicy&) = delete;
  InferencePolicy& operator=(const InferencePolicy&) = delete;

  bool fused() const { return fast_ != nullptr; }
  int64_t rows() const { return rows_; }
  int64_t parameter_count() const { return parameter_count_; }
  // Floats of one policy version: the parameters, then the observation
  // statistics where the model normalises (PolicyNetImpl::published_count()).
  int64_t published_count() const { return published_count_; }

  // A new policy version, published_count() floats as the learner publishes
  // them (the weight slab's copy): the parameters in parameter_list()'s
  // layout, then the observation statistics. Copies them.
  void load(const float* flat);

  // One step of the K envs: obs [K, obs...] of the env's dtype (contiguous)
  // → one action per env, written as sample_actions() writes them
  // (model/sampling.h), with its log-prob where into.log_probs is set;
  // greedy: the most likely action or the Gaussian's mean. A recurrent core
  // moves on to the state after this step.
  void act(const void* obs, bool greedy, const ActionsOut& into);

  // Where forward() writes: logits (or Gaussian means) [K, A], the log-std
  // [K, D] (Gaussian; unused otherwise), values [K].
  struct Outputs {
    float* logits = nullptr;
    float* log_std = nullptr;
    float* values = nullptr;
  };
  // The network's outputs for one step of the K envs, as act() computes them
  // before it samples; a recurrent core moves on as act() moves it. What
  // `pronghorn eval --dump-forward` writes and an export must reproduce.
  void forward(const void* obs, const Outputs& into);

  // V of K observations into out [K], from each env's core state as it is
  // now, which stays as it was: the final observation of an episode a time
  // limit cut continues the step act() just took.
  void values(const void* obs, float* out);

  // Zeroes the core state of the envs whose episode ended at this step
  // (terminated or truncated [K], nonzero = yes): their next step starts a
  // fresh episode. Nothing to do for a feed-forward model.
  void reset_ended(const uint8_t* terminated, const uint8_t* truncated);
  // Every env's core state to zeros (fresh episodes everywhere).
  void reset();
  // The core state, h then c, into [2, K, H] (the slot's core_state field);
  // writes nothing for a feed-forward model.
  void write_core_state(float* into) const;
  // H: the core state's width; 0 for a feed-forward model.
  int64_t core_width() const { return core_.h.defined() ? core_.h.size(1) : 0; }

 private:
  at::Tensor observations(const void* obs) const;  // [K, obs...], preprocessed
  // The fused path's input: `obs` itself, or its normalised copy in scratch_.
  const float* fused_input(const void* obs);

  PolicyNet model_;
  EnvSpec env_;
  int64_t rows_;
  int64_t parameter_count_, published_count_;
  std::unique_ptr<FastMlp> fast_;  // set: the fused path
  std::vector<float> scratch_;     // [K, obs]: normalised observations (fused path)
  CoreState core_;                 // LibTorch, recurrent: [K, H] each
  at::Tensor keep_;                // [K, 1] float32: 0 where an episode ended
};

// The training half: the learner's model and optimizer. One thread (the
// learner's loop).
class TrainingPolicy {
 public:
  // Moves `model` to `device` and makes the optimizer learner.optimizer
  // names over its parameters (learner.learning_rate, adam_eps,
  // rmsprop_alpha).
  TrainingPolicy(PolicyNet model, at::Device device, const ModelConfig& model_config,
                 const LearnerConfig& learner);
  ~TrainingPolicy();
  TrainingPolicy(const TrainingPolicy&) = delete;
  TrainingPolicy& operator=(const TrainingPolicy&) = delete;

  PolicyNet& model() { return model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  std::vector<ParameterEntry> parameters() { return parameter_list(*model_); }

  // The network over S steps of N envs, differentiable: obs [S, N, obs...]
  // (uint8 or float32) → logits (or Gaussian means) [S·N, A], log_std
  // [S·N, D] (Gaussian), value [S·N], step-major. A recurrent model runs its
  // core from core_state [2, N, H] (h, c) and zeroes it after each step where
  // ended [S−1, N] is set; a feed-forward one ignores both (undefined is
  // fine). The fused MLP path where it applies (model/fast_mlp_train.h).
  PolicyOutput forward(const at::Tensor& obs, const at::Tensor& core_state,
                       const at::Tensor& ended);

  void zero_grad();
  // Scales the gradients so that their global L2 norm is at most max_norm
  // (infinity: never); returns the norm before (NaN or inf if a gradient is).
  double clip_gradients(double max_norm);
  // One optimizer step at `learning_rate`, on LibTorch's optimizer state
  // either way (so optimizer().save() is the same whichever path stepped).
  void step(double learning_rate);

 private:
  PolicyNet model_;
  bool fused_;  // model.fast_path = auto: the fused clip and Adam
  ModelConfig::FastPath mode_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace pronghorn
