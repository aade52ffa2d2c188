#include "model/policy.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/activation.h"
#include "model/network_layout.h"

namespace pronghorn {

ModelSpec model_spec_for(const EnvSpec& env, const ModelConfig& config) {
  ModelSpec spec;
  spec.obs_shape = env.obs_shape;
  using Kind = ModelConfig::Kind;
  spec.pixels =
      config.kind == Kind::kImpalaCnn || config.kind == Kind::kNatureCnn ||
      (config.kind == Kind::kAuto && env.obs_dtype == Dtype::kUInt8 && env.obs_shape.size() == 3);
  PRONGHORN_CHECK(!spec.pixels || env.obs_shape.size() == 3, "model.kind = \"",
                  to_string(config.kind), "\": env ", env.name,
                  " has no [C, H, W] image observations");
  if (config.kind == Kind::kNatureCnn) {
    spec.cnn = ModelSpec::Cnn::kNature;
    // Its 8×8 stride-4, 4×4 stride-2 and 3×3 convolutions, unpadded, leave
    // one pixel of a 36×36 frame.
    PRONGHORN_CHECK(env.obs_shape[1] >= 36 && env.obs_shape[2] >= 36,
                    "model.kind = \"nature_cnn\": env ", env.name, " gives ", env.obs_shape[1], "×",
                    env.obs_shape[2],
                    " frames; its convolutions need at least 36×36 (84×84 in the paper)");
  }
  spec.continuous = env.action_kind == ActionKind::kContinuous;
  spec.actions = env.action_size;
  spec.hidden = config.hidden;
  spec.activation = config.activation;
  spec.core_hidden = config.core == ModelConfig::Core::kLstm ? config.core_hidden : 0;
  spec.init = config.init;
  spec.log_std_init = config.log_std_init;
  spec.normalize_observations = config.normalize_observations;
  spec.observation_clip = config.observation_clip;
  spec.separate_value = config.separate_value;
  spec.value_hidden = config.value_hidden;
  PRONGHORN_CHECK(
      spec.separate_value || config.value_hidden.empty() || config.value_hidden == config.hidden,
      "model.value_hidden is set: expected model.separate_value = true (the value "
      "head otherwise sits on the policy's torso, of model.hidden's widths)");
  PRONGHORN_CHECK(!spec.separate_value || (!spec.pixels && spec.core_hidden == 0),
                  "model.separate_value = true: expected an MLP policy without a core (env ",
                  env.name, spec.pixels ? " gives images: a CNN" : "",
                  spec.core_hidden > 0 ? ", model.core = \"lstm\"" : "", ")");
  PRONGHORN_CHECK(
      !spec.normalize_observations || (env.obs_dtype == Dtype::kFloat32 && !spec.pixels),
      "model.normalize_observations = true: env ", env.name,
      " gives image observations (uint8 pixels); it normalises float observations");
  return spec;
}

namespace {

torch::nn::Conv2d conv(const TorsoLayer& layer, int64_t in) {
  return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, layer.out, layer.kernel)
                               .stride(layer.stride)
                               .padding(layer.padding));
}

// relu → conv → relu → conv, plus the input (IMPALA's residual block).
class ResidualBlockImpl : public torch::nn::Module {
 public:
  explicit ResidualBlockImpl(const TorsoLayer& layer)
      : first_(register_module("first", conv(layer, layer.out))),
        second_(register_module("second", conv(layer, layer.out))) {}

  at::Tensor forward(const at::Tensor& x) {
    return x + second_->forward(at::relu(first_->forward(at::relu(x))));
  }

 private:
  torch::nn::Conv2d first_, second_;
};
TORCH_MODULE(ResidualBlock);

torch::nn::AnyModule module_for(const TorsoLayer& layer) {
  using Kind = TorsoLayer::Kind;
  switch (layer.kind) {
    case Kind::kLinear:
      return torch::nn::AnyModule(torch::nn::Linear(layer.in, layer.out));
    case Kind::kConv:
      return torch::nn::AnyModule(conv(layer, layer.in));
    case Kind::kMaxPool:
      return torch::nn::AnyModule(torch::nn::MaxPool2d(
          torch::nn::MaxPool2dOptions(layer.kernel).stride(layer.stride).padding(layer.padding)));
    case Kind::kResidual:
      return torch::nn::AnyModule(ResidualBlock(layer));
    case Kind::kRelu:
      return torch::nn::AnyModule(torch::nn::ReLU());
    case Kind::kTanh:
      return torch::nn::AnyModule(torch::nn::Functional(tanh_activation));
    case Kind::kFlatten:
      return torch::nn::AnyModule(torch::nn::Flatten());
  }
  throw Error("model: unknown torso layer");
}

}  // namespace

PolicyNetImpl::PolicyNetImpl(const ModelSpec& spec) : spec_(spec) {
  PRONGHORN_CHECK(spec.actions >= 1, "model: expected at least one action");
  const NetworkLayout layout = network_layout(spec);
  torch::nn::Sequential torso;
  for (const TorsoLayer& layer : layout.torso) torso->push_back(module_for(layer));
  int64_t width = layout.torso_width;
  torso_ = register_module("torso", torso);
  if (!layout.value_torso.empty()) {
    torch::nn::Sequential value_torso;
    for (const TorsoLayer& layer : layout.value_torso) value_torso->push_back(module_for(layer));
    value_torso_ = register_module("value_torso", value_torso);
  }
  // Registered only when wanted: a feed-forward model keeps its parameters
  // (and so its checkpoints) as they were before the core existed.
  if (spec.core_hidden > 0) {
    core_ = register_module("core", LstmCore(width, spec.core_hidden));
    width = spec.core_hidden;
  }
  policy_ = register_module("policy", torch::nn::Linear(width, spec.actions));
  value_ = register_module("value", torch::nn::Linear(layout.value_width, 1));
  if (spec.continuous) {
    log_std_ = register_parameter("log_std", at::full({spec.actions}, spec.log_std_init));
  }
  torch::NoGradGuard no_grad;
  if (spec.init == ModelConfig::Init::kOrthogonal) {
    initialise_orthogonally();
  } else {
    // Small initial policy weights: a near-uniform first policy explores.
    policy_->weight.mul_(0.01);
    policy_->bias.zero_();
  }
  // Before any batch: mean 0, variance 1, as the running statistics start.
  if (spec.normalize_observations) set_observation_statistics(ObservationStats(observation_size()));
}

// model.init = "orthogonal": each weight orthogonal (its rows, or its
// columns, orthonormal, times the gain; a conv's as [out, in·kh·kw]), each
// bias 0. √2 suits relu and is what CleanRL and Stable-Baselines3 use for
// tanh torsos too.
void PolicyNetImpl::initialise_orthogonally() {
  const auto set = [](at::Tensor& weight, at::Tensor& bias, double gain) {
    torch::nn::init::orthogonal_(weight, gain);
    if (bias.defined()) bias.zero_();
  };
  std::vector<std::shared_ptr<torch::nn::Module>> torsos = torso_->modules(false);
  if (value_torso_) {
    for (const auto& m : value_torso_->modules(false)) torsos.push_back(m);
  }
  for (const std::shared_ptr<torch::nn::Module>& m : torsos) {
    if (auto* linear = m->as<torch::nn::Linear>())
      set(linear->weight, linear->bias, std::sqrt(2.0));
    if (auto* conv = m->as<torch::nn::Conv2d>()) set(conv->weight, conv->bias, std::sqrt(2.0));
  }
  if (core_) {
    for (at::Tensor& p : core_->parameters()) {
      if (p.dim() == 2) {
        torch::nn::init::orthogonal_(p, 1.0);
      } else {
        p.zero_();
      }
    }
  }
  set(policy_->weight, policy_->bias, 0.01);
  set(value_->weight, value_->bias, 1.0);
}

at::Tensor gaussian_log_prob(const at::Tensor& x, const at::Tensor& mean,
                             const at::Tensor& log_std) {
  const at::Tensor z = (x - mean) / log_std.exp();
  return (-0.5 * z * z - log_std - 0.9189385332046727).sum(-1);  // 0.9189… = ½ ln 2π
}

at::Tensor PolicyNetImpl::flattened(const at::Tensor& obs) {
  // Preprocessing (pixels to [0, 1]) is the policy face's (model/policy_face.h).
  PRONGHORN_CHECK(
      obs.is_floating_point(), "model: observations of dtype ", obs.scalar_type(),
      "; the network takes them preprocessed (preprocess_observations(), model/policy_face.h)");
  if (spec_.pixels) {
    // Channels-last on the CPU: oneDNN's convolutions train the Nature CNN
    // 1.2× faster so (BENCHMARKS.md, 2026-11-28 (Atari)). Only the
    // activations change layout; autograd gives each parameter's gradient
    // its parameter's layout, so what reads them as flat memory (the fused
    // Adam, the all-reduce, checkpoints) is unchanged.
    if (obs.is_cpu() && obs.dim() == 4) return obs.contiguous(at::MemoryFormat::ChannelsLast);
    return obs;
  }
  return obs.reshape({obs.size(0), -1});  // NetworkLayout::flatten_input
}

at::Tensor PolicyNetImpl::features(const at::Tensor& obs) {
  return torso_->forward(flattened(obs));
}

PolicyOutput PolicyNetImpl::heads(const at::Tensor& h, const at::Tensor& value_features) {
  PolicyOutput out;
  out.logits = policy_->forward(h);
  out.value = value_->forward(value_features.defined() ? value_features : h).squeeze(-1);
  if (spec_.continuous) out.log_std = log_std_.expand_as(out.logits);
  return out;
}

PolicyOutput PolicyNetImpl::forward(const at::Tensor& obs) {
  PRONGHORN_CHECK(!recurrent(), "model: a recurrent model steps with its core's state");
  if (!value_torso_) return heads(features(obs));
  const at::Tensor x = flattened(obs);
  return heads(torso_->forward(x), value_torso_->forward(x));
}

PolicyOutput PolicyNetImpl::forward(const at::Tensor& obs, CoreState& state) {
  if (!recurrent()) return forward(obs);
  const at::Tensor x = features(obs);                                    // [N, width]
  return heads(core_->forward(x.unsqueeze(0), state, at::Tensor())[0]);  // [N, H]
}

PolicyOutput PolicyNetImpl::forward_sequence(const at::Tensor& obs, CoreState& state,
                                             const at::Tensor& ended) {
  const int64_t S = obs.size(0), N = obs.size(1);
  if (!recurrent()) return forward(obs.flatten(0, 1));
  const at::Tensor x = features(obs.flatten(0, 1));  // [S·N, width]: the torso in one batch
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

void PolicyNetImpl::set_observation_statistics(const ObservationStats& stats) {
  PRONGHORN_CHECK(spec_.normalize_observations,
                  "observation statistics for a model that does not normalise observations");
  PRONGHORN_CHECK(stats.size() == observation_size(), "observation statistics of ", stats.size(),
                  " values for observations of ", observation_size());
  const at::TensorOptions options = policy_->weight.options().requires_grad(false);
  observation_mean_ = at::tensor(stats.mean, at::kDouble).to(options.dtype(at::kFloat));
  observation_var_ = at::tensor(stats.var, at::kDouble).to(options.dtype(at::kFloat));
}

void PolicyNetImpl::drop_observation_statistics() {
  observation_mean_ = observation_var_ = at::Tensor();
}

int64_t PolicyNetImpl::observation_size() const {
  int64_t n = 1;
  for (int64_t dim : spec_.obs_shape) n *= dim;
  return n;
}

int64_t PolicyNetImpl::published_count() {
  return parameter_count() + (spec_.normalize_observations ? 2 * observation_size() : 0);
}

// Only evaluation and export drop statistics, and neither publishes.
void PolicyNetImpl::write_published(float* out) {
  write_flat(out);
  if (!spec_.normalize_observations) return;
  PRONGHORN_CHECK(normalizes_observations(),
                  "publishing a model whose observation statistics "
                  "were dropped");
  const int64_t d = observation_size();
  float* at = out + parameter_count();
  const at::Tensor mean = observation_mean_.to(at::kCPU).contiguous();
  const at::Tensor var = observation_var_.to(at::kCPU).contiguous();
  std::memcpy(at, mean.data_ptr<float>(), sizeof(float) * d);
  std::memcpy(at + d, var.data_ptr<float>(), sizeof(float) * d);
}

void PolicyNetImpl::read_published(const float* in) {
  read_flat(in);
  read_observation_statistics(in + parameter_count());
}

void PolicyNetImpl::read_observation_statistics(const float* in) {
  if (!spec_.normalize_observations) return;
  const int64_t d = observation_size();
  const at::TensorOptions options = policy_->weight.options().requires_grad(false);
  observation_mean_ =
      at::from_blob(const_cast<float*>(in), {d}, at::kFloat).to(options, false, true);
  observation_var_ =
      at::from_blob(const_cast<float*>(in + d), {d}, at::kFloat).to(options, false, true);
}

void PolicyNetImpl::read_flat(const float* in) {
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : parameters()) {
    p.copy_(at::from_blob(const_cast<float*>(in), p.sizes(), at::kFloat));  // to p's device
    in += p.numel();
  }
}

}  // namespace pronghorn
