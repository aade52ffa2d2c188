// The policy-and-value network, one class for actors and the learner (same
// parameters in the same order, so weights travel as one flat float32
// vector through the weight slab). docs/architecture.md §3. Outside model/
// it is run through the policy face (model/policy_face.h), which
// preprocesses observations and picks the fused MLP path where it applies.
//   vector observations → MLP (model.hidden, model.activation)
//   image observations (uint8 [C, H, W]) → the IMPALA CNN, then the MLP
//   then, with model.core = "lstm", an LSTM (model/lstm_core.h) whose state
//   each env carries from step to step
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

namespace pronghorn {

struct ModelSpec {
  std::vector<int64_t> obs_shape;  // one observation
  bool pixels = false;             // images [C, H, W]: the IMPALA CNN torso
  int64_t actions = 0;             // categorical: number of actions; Gaussian: dims
  bool continuous = false;
  std::vector<int64_t> hidden = {64, 64};
  ModelConfig::Activation activation = ModelConfig::Activation::kTanh;
  int64_t core_hidden = 0;  // the LSTM core's width; 0 = feed-forward
  ModelConfig::Init init = ModelConfig::Init::kDefault;
  double log_std_init = 0.0;
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
  // ObservationPreprocessor, model/policy_face.h). Feed-forward models only.
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

 private:
  void initialise_orthogonally();
  at::Tensor features(const at::Tensor& obs);  // the torso's output, [N, width]
  PolicyOutput heads(const at::Tensor& features);

  ModelSpec spec_;
  torch::nn::Sequential torso_{nullptr};
  LstmCore core_{nullptr};  // recurrent models only
  torch::nn::Linear policy_{nullptr};
  torch::nn::Linear value_{nullptr};
  at::Tensor log_std_;
};
TORCH_MODULE(PolicyNet);

}  // namespace pronghorn
