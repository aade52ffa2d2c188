// The policy-and-value network, one class for actors and the learner (same
// parameters in the same order, so weights travel as one flat float32
// vector through the weight slab). docs/architecture.md §3. Outside model/
// it is run through the policy face (model/policy_face.h), which
// preprocesses observations and picks the fused MLP path where it applies.
//   vector observations → MLP (model.hidden, model.activation)
//   image observations (uint8 [C, H, W]) → the IMPALA CNN (or, with
//   model.kind = "nature_cnn", the Nature DQN's three convolutions), then the MLP
//   then, with model.core = "lstm", an LSTM (model/lstm_core.h) whose state
//   each env carries from step to step
//   with model.separate_value, the value head on an MLP of its own
//   ("value_torso"), beside the policy's
// Heads: categorical logits [N, A], or Gaussian mean [N, D] with a learned
// state-independent log-std [D]; value [N].
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "model/lstm_core.h"
#include "model/observation_norm.h"

namespace pronghorn {

struct ModelSpec {
  std::vector<int64_t> obs_shape;  // one observation
  bool pixels = false;             // images [C, H, W]: a CNN torso (`cnn`)
  enum class Cnn { kImpala, kNature };
  Cnn cnn = Cnn::kImpala;
  int64_t actions = 0;  // categorical: number of actions; Gaussian: dims
  bool continuous = false;
  std::vector<int64_t> hidden = {64, 64};
  ModelConfig::Activation activation = ModelConfig::Activation::kTanh;
  int64_t core_hidden = 0;  // the LSTM core's width; 0 = feed-forward
  ModelConfig::Init init = ModelConfig::Init::kDefault;
  double log_std_init = 0.0;
  // Float vector observations normalised by running statistics before the
  // network (model/observation_norm.h), clipped to ±observation_clip.
  bool normalize_observations = false;
  double observation_clip = 10.0;
  bool separate_value = false;        // the value head on a torso of its own
  std::vector<int64_t> value_hidden;  // that torso's widths; empty: hidden's
  const std::vector<int64_t>& value_widths() const {
    return value_hidden.empty() ? hidden : value_hidden;
  }
};

// The model an env needs: its observation and action spaces, and the config.
ModelSpec model_spec_for(const EnvSpec& env, const ModelConfig& config);

struct PolicyOutput {
  at::Tensor logits;   // [N, A] categorical, or the Gaussian mean [N, D]
  at::Tensor log_std;  // [N, D] Gaussian only (the learned vector, expanded)
  at::Tensor value;    // [N]
};

// log N(x; mean, diag(exp(log_std))²), summed over the last dimension: the
// Gaussian head's log-prob, as the actor records it and the learner
// recomputes it. x, mean, log_std: [..., D] → [...].
at::Tensor gaussian_log_prob(const at::Tensor& x, const at::Tensor& mean,
                             const at::Tensor& log_std);

class PolicyNetImpl : public torch::nn::Module {
 public:
  explicit PolicyNetImpl(const ModelSpec& spec);

  // obs: [N, obs...] float32, preprocessed (uint8 pixels scaled by
  // preprocess_observations(), model/policy_face.h). Feed-forward models only.
  PolicyOutput forward(const at::Tensor& obs);

  // One step of N envs: `state` (initial_state() at an episode's start) is
  // replaced by the state after it. A feed-forward model ignores `state`.
  PolicyOutput forward(const at::Tensor& obs, CoreState& state);

  // S steps of N envs, obs [S, N, obs...], from `state` at step 0 (replaced
  // by the state after step S−1); ended [S−1, N] (uint8, nonzero where an
  // episode ended at step s) zeroes the state after step s. Outputs as
  // forward()'s for the [S·N] observations, step-major. Feed-forward models
  // run all S·N at once.
  PolicyOutput forward_sequence(const at::Tensor& obs, CoreState& state, const at::Tensor& ended);

  bool recurrent() const { return spec_.core_hidden > 0; }
  // Zeros [N, core_hidden] for h and c, of the parameters' dtype and device;
  // undefined tensors for a feed-forward model.
  CoreState initial_state(int64_t n);

  const ModelSpec& spec() const { return spec_; }
  int64_t parameter_count();
  // All parameters as one flat vector, in registration order.
  void write_flat(float* out);
  void read_flat(const float* in);

  // The observation statistics the policy face normalises with (float32
  // [obs size] each, on the parameters' device); undefined when the model
  // does not normalise, or was loaded from a checkpoint that holds none.
  const at::Tensor& observation_mean() const { return observation_mean_; }
  const at::Tensor& observation_var() const { return observation_var_; }
  bool normalizes_observations() const { return observation_mean_.defined(); }
  // The running statistics' float32 copy becomes the applied one.
  void set_observation_statistics(const ObservationStats& stats);
  // None applied from now on (a checkpoint written without them).
  void drop_observation_statistics();

  // What travels to the actors as one policy version (the weight slab): the
  // flat parameters, then the observation mean and variance when the spec
  // normalises (2 × obs size floats). Sized by the spec, not by whether
  // statistics are held now.
  int64_t published_count();
  void write_published(float* out);
  void read_published(const float* in);
  // The statistics part of a published vector (at parameter_count()): what
  // the fused path, which holds its own parameters, reads of a version.
  void read_observation_statistics(const float* in);
  int64_t observation_size() const;  // floats per observation

 private:
  void initialise_orthogonally();
  at::Tensor flattened(const at::Tensor& obs);  // the torso's input
  at::Tensor features(const at::Tensor& obs);   // the torso's output, [N, width]
  // The heads on `features`; the value head on `value_features` (the value
  // torso's output) where the model has one, else on `features`.
  PolicyOutput heads(const at::Tensor& features, const at::Tensor& value_features = {});

  ModelSpec spec_;
  torch::nn::Sequential torso_{nullptr};
  torch::nn::Sequential value_torso_{nullptr};  // model.separate_value only
  LstmCore core_{nullptr};                      // recurrent models only
  torch::nn::Linear policy_{nullptr};
  torch::nn::Linear value_{nullptr};
  at::Tensor log_std_;
  at::Tensor observation_mean_, observation_var_;  // float32 [obs size]; see above
};
TORCH_MODULE(PolicyNet);

}  // namespace pronghorn
