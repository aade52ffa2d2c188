#include "model/policy.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cstring>

#include "core/error.h"
#include "model/activation.h"

namespace pronghorn {

ModelSpec model_spec_for(const EnvSpec& env, const ModelConfig& config) {
  ModelSpec spec;
  spec.obs_shape = env.obs_shape;
  spec.pixels = config.kind == ModelConfig::Kind::kImpalaCnn ||
                (config.kind == ModelConfig::Kind::kAuto && env.obs_dtype == Dtype::kUInt8 &&
                 env.obs_shape.size() == 3);
  PRONGHORN_CHECK(!spec.pixels || env.obs_shape.size() == 3, "model.kind = \"",
                  to_string(config.kind), "\": env ", env.name,
                  " has no [C, H, W] image observations");
  spec.continuous = env.action_kind == ActionKind::kContinuous;
  spec.actions = env.action_size;
  spec.hidden = config.hidden;
  spec.activation = config.activation;
  spec.core_hidden = config.core == ModelConfig::Core::kLstm ? config.core_hidden : 0;
  return spec;
}

namespace {

// relu → conv 3×3 → relu → conv 3×3, plus the input (IMPALA's residual block).
class ResidualBlockImpl : public torch::nn::Module {
 public:
  explicit ResidualBlockImpl(int64_t channels)
      : first_(register_module("first", conv3x3(channels, channels))),
        second_(register_module("second", conv3x3(channels, channels))) {}

  at::Tensor forward(const at::Tensor& x) {
    return x + second_->forward(at::relu(first_->forward(at::relu(x))));
  }

  static torch::nn::Conv2d conv3x3(int64_t in, int64_t out) {
    return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).padding(1));
  }

 private:
  torch::nn::Conv2d first_, second_;
};
TORCH_MODULE(ResidualBlock);

// The IMPALA CNN (Espeholt et al. 2018): three sections of conv 3×3 →
// max-pool 3×3 stride 2 → two residual blocks, with 16, 32, 32 channels,
// then relu. Returns the flattened width.
int64_t add_impala_cnn(torch::nn::Sequential& torso, const std::vector<int64_t>& chw) {
  int64_t channels = chw[0], h = chw[1], w = chw[2];
  for (int64_t out : {16, 32, 32}) {
    torso->push_back(ResidualBlockImpl::conv3x3(channels, out));
    torso->push_back(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
    torso->push_back(ResidualBlock(out));
    torso->push_back(ResidualBlock(out));
    channels = out;
    h = (h - 1) / 2 + 1;  // (h + 2·1 − 3) / 2 + 1
    w = (w - 1) / 2 + 1;
  }
  torso->push_back(torch::nn::ReLU());
  torso->push_back(torch::nn::Flatten());
  return channels * h * w;
}

}  // namespace

PolicyNetImpl::PolicyNetImpl(const ModelSpec& spec) : spec_(spec) {
  PRONGHORN_CHECK(spec.actions >= 1, "model: expected at least one action");
  torch::nn::Sequential torso;
  int64_t width = 1;
  if (spec.pixels) {
    PRONGHORN_CHECK(spec.obs_shape.size() == 3, "model: pixel observations need [C, H, W]");
    width = add_impala_cnn(torso, spec.obs_shape);
  } else {
    for (int64_t d : spec.obs_shape) width *= d;
  }
  for (int64_t units : spec.hidden) {
    torso->push_back(torch::nn::Linear(width, units));
    if (spec.activation == ModelConfig::Activation::kRelu)
      torso->push_back(torch::nn::ReLU());
    else
      torso->push_back(torch::nn::Functional(tanh_activation));
    width = units;
  }
  torso_ = register_module("torso", torso);
  // Registered only when wanted: a feed-forward model keeps its parameters
  // (and so its checkpoints) as they were before the core existed.
  if (spec.core_hidden > 0) {
    core_ = register_module("core", LstmCore(width, spec.core_hidden));
    width = spec.core_hidden;
  }
  policy_ = register_module("policy", torch::nn::Linear(width, spec.actions));
  value_ = register_module("value", torch::nn::Linear(width, 1));
  // Small initial policy weights: a near-uniform first policy explores.
  torch::NoGradGuard no_grad;
  policy_->weight.mul_(0.01);
  policy_->bias.zero_();
  if (spec.continuous) log_std_ = register_parameter("log_std", at::zeros({spec.actions}));
}

at::Tensor gaussian_log_prob(const at::Tensor& x, const at::Tensor& mean,
                             const at::Tensor& log_std) {
  const at::Tensor z = (x - mean) / log_std.exp();
  return (-0.5 * z * z - log_std - 0.9189385332046727).sum(-1);  // 0.9189… = ½ ln 2π
}

at::Tensor PolicyNetImpl::features(const at::Tensor& obs) {
  // Preprocessing (pixels to [0, 1]) is the policy face's (model/policy_face.h).
  PRONGHORN_CHECK(obs.is_floating_point(), "model: observations of dtype ", obs.scalar_type(),
                  "; the network takes them preprocessed (ObservationPreprocessor)");
  at::Tensor x = obs;
  if (!spec_.pixels) x = x.reshape({x.size(0), -1});
  return torso_->forward(x);
}

PolicyOutput PolicyNetImpl::heads(const at::Tensor& h) {
  PolicyOutput out;
  out.logits = policy_->forward(h);
  out.value = value_->forward(h).squeeze(-1);
  if (spec_.continuous) out.log_std = log_std_.expand_as(out.logits);
  return out;
}

PolicyOutput PolicyNetImpl::forward(const at::Tensor& obs) {
  PRONGHORN_CHECK(!recurrent(), "model: a recurrent model steps with its core's state");
  return heads(features(obs));
}

PolicyOutput PolicyNetImpl::forward(const at::Tensor& obs, CoreState& state) {
  if (!recurrent()) return heads(features(obs));
  const at::Tensor x = features(obs);                                    // [N, width]
  return heads(core_->forward(x.unsqueeze(0), state, at::Tensor())[0]);  // [N, H]
}

PolicyOutput PolicyNetImpl::forward_sequence(const at::Tensor& obs, CoreState& state,
                                             const at::Tensor& ended) {
  const int64_t S = obs.size(0), N = obs.size(1);
  const at::Tensor x = features(obs.flatten(0, 1));  // [S·N, width]: the torso in one batch
  if (!recurrent()) return heads(x);
  return heads(core_->forward(x.reshape({S, N, -1}), state, ended).flatten(0, 1));
}

CoreState PolicyNetImpl::initial_state(int64_t n) {
  if (!recurrent()) return {};
  const at::TensorOptions options = policy_->weight.options().requires_grad(false);
  return {at::zeros({n, spec_.core_hidden}, options), at::zeros({n, spec_.core_hidden}, options)};
}

int64_t PolicyNetImpl::parameter_count() {
  int64_t n = 0;
  for (const at::Tensor& p : parameters()) n += p.numel();
  return n;
}

void PolicyNetImpl::write_flat(float* out) {
  for (const at::Tensor& p : parameters()) {
    at::Tensor c = p.detach().to(at::kCPU).contiguous();  // a copy when the model is on a GPU
    std::memcpy(out, c.data_ptr<float>(), sizeof(float) * c.numel());
    out += c.numel();
  }
}

void PolicyNetImpl::read_flat(const float* in) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : parameters()) {
    p.copy_(at::from_blob(const_cast<float*>(in), p.sizes(), at::kFloat));  // to p's device
    in += p.numel();
  }
}

}  // namespace pronghorn
