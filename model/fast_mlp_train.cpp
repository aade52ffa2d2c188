#include "model/fast_mlp_train.h"

#include <cblas.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "model/fast_gemm.h"
#include "model/fast_mlp_loops.h"

namespace pronghorn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using fast_mlp::gemm;

// The network as raw pointers: hidden layer l maps width[l] → width[l + 1]
// with weight[l] [width[l + 1], width[l]] and bias[l]; then the heads on the
// last hidden width H: policy [A, H] + [A] and value [1, H] + [1], or one
// head alone (model.separate_value: each torso with its own), in the policy
// head's place (A = 1 for the value's), value_weight null.
struct Net {
  std::vector<int64_t> width;
  std::vector<float*> weight, bias;  // the hidden layers'
  float *policy_weight = nullptr, *policy_bias = nullptr;
  float *value_weight = nullptr, *value_bias = nullptr;
  int64_t actions = 0;
  bool relu = false;
  int64_t hidden() const { return static_cast<int64_t>(weight.size()); }
};

// params: an MLP's hidden layers' weights and biases, then its `heads` (1 or
// 2) heads' (mlp_parameters() below), or their gradients in the same order.
Net net_of(const std::vector<at::Tensor>& params, bool relu, int64_t heads) {
  Net net;
  net.relu = relu;
  const int64_t hidden = static_cast<int64_t>(params.size()) / 2 - heads;
  net.width.push_back(params[0].size(1));
  for (int64_t l = 0; l < hidden; ++l) {
    net.weight.push_back(params[2 * l].data_ptr<float>());
    net.bias.push_back(params[2 * l + 1].data_ptr<float>());
    net.width.push_back(params[2 * l].size(0));
  }
  const size_t p = 2 * hidden;
  net.actions = params[p].size(0);
  net.policy_weight = params[p].data_ptr<float>();
  net.policy_bias = params[p + 1].data_ptr<float>();
  if (heads == 2) {
    net.value_weight = params[p + 2].data_ptr<float>();
    net.value_bias = params[p + 3].data_ptr<float>();
  }
  return net;
}

// The hidden activations of n rows, act[l] [n, width[l + 1]], then the
// heads: logits [n, A] and value [n] (none with one head). One matrix product per layer over all
// rows (model/fast_gemm.h; the BLAS blocks it for the cache), then one
// element-wise pass; the value head, one row of weights, is an sgemv.
void forward_rows(const Net& net, const float* x, int64_t n, const std::vector<float*>& act,
                  float* logits, float* value) {
  for (int64_t l = 0; l < net.hidden(); ++l) {
    const int64_t in = net.width[l], width = net.width[l + 1];
    gemm(false, true, n, width, in, x, in, net.weight[l], in, 0.0f, act[l], width);
    fast_mlp::bias_activation(act[l], net.bias[l], n, width, net.relu);
    x = act[l];
  }
  const int64_t H = net.width.back(), A = net.actions;
  gemm(false, true, n, A, H, x, H, net.policy_weight, H, 0.0f, logits, A);
  fast_mlp::add_bias(logits, net.policy_bias, n, A);
  if (net.value_weight == nullptr) return;
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(H), 1.0f, x,
              static_cast<int>(H), net.value_weight, 1, 0.0f, value, 1);
  fast_mlp::add_bias(value, net.value_bias, n, 1);
}

// Rows at the end whose output gradients are all zero add nothing to any
// gradient: the learner's bootstrap row T, whose value is detached. The
// number of rows before them. g_value: null with one head.
int64_t rows_with_gradient(const float* g_logits, const float* g_value, int64_t n, int64_t A) {
  for (; n > 0; --n) {
    bool zero = g_value == nullptr || g_value[n - 1] == 0.0f;
    for (int64_t a = 0; a < A && zero; ++a) zero = g_logits[(n - 1) * A + a] == 0.0f;
    if (!zero) break;
  }
  return n;
}

// p's gradient buffer, which the backward pass adds into as AccumulateGrad
// would (made zero on the first backward).
at::Tensor grad_of(const at::Tensor& p) {
  at::Tensor& g = p.mutable_grad();
  if (!g.defined()) g = at::zeros_like(p, at::MemoryFormat::Contiguous);
  return g;
}

class FusedMlp : public torch::autograd::Function<FusedMlp> {
 public:
  // params: the torso's weights and biases, then the policy head's and the
  // value head's (PolicyNet's order, log_std left out), or with heads = 1 a
  // torso and one head. Returns the logits [N, A] and the value [N], or the
  // one head's [N, A].
  static variable_list forward(AutogradContext* ctx, const at::Tensor& obs, bool relu,
                               int64_t heads, at::TensorList params) {
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["heads"] = heads;
    const Net net = net_of(params.vec(), relu, heads);
    const int64_t N = obs.size(0);
    at::Tensor logits = at::empty({N, net.actions}, obs.options());
    at::Tensor value = heads == 2 ? at::empty({N}, obs.options()) : at::Tensor();
    // The hidden activations, kept for the backward pass (as LibTorch's
    // autograd keeps them): [N, width] per hidden layer.
    std::vector<at::Tensor> saved = {obs};
    saved.insert(saved.end(), params.begin(), params.end());
    std::vector<float*> act;
    for (int64_t l = 0; l < net.hidden(); ++l) {
      saved.push_back(at::empty({N, net.width[l + 1]}, obs.options()));
      act.push_back(saved.back().data_ptr<float>());
    }
    forward_rows(net, obs.data_ptr<float>(), N, act, logits.data_ptr<float>(),
                 heads == 2 ? value.data_ptr<float>() : nullptr);
    ctx->save_for_backward(saved);
    if (heads == 1) return {logits};
    return {logits, value};
  }

  // Adds each parameter's gradient into its .grad itself (products with β = 1)
  // and hands autograd none: no gradient tensors to allocate, and no
  // accumulation pass per parameter.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& obs = saved[0];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    // obs, 2 parameters a head, 2 parameters and 1 activation a hidden layer.
    const int64_t hidden = static_cast<int64_t>(saved.size() - 1 - 2 * heads) / 3;
    const std::vector<at::Tensor> params(saved.begin() + 1, saved.end() - hidden);
    std::vector<at::Tensor> grad_tensors;
    for (const at::Tensor& p : params) grad_tensors.push_back(grad_of(p));
    const bool relu = ctx->saved_data["relu"].toBool();
    const Net net = net_of(params, relu, heads), d = net_of(grad_tensors, relu, heads);
    const int64_t N = obs.size(0), A = net.actions, H = net.width.back();
    // An output no loss reached comes as zeros (LibTorch materialises them).
    const at::Tensor g_logits = grads[0].contiguous();
    const at::Tensor g_value = heads == 2 ? grads[1].contiguous() : at::Tensor();
    const float* gl = g_logits.data_ptr<float>();
    const float* gv = heads == 2 ? g_value.data_ptr<float>() : nullptr;
    const int64_t n = rows_with_gradient(gl, gv, N, A);
    if (n == 0) return no_gradients(params.size());
    const float* top =
        hidden > 0 ? saved[saved.size() - 1].data_ptr<float>() : obs.data_ptr<float>();
    // The heads: ∂W = gᵀ·h, ∂b = Σ g.
    gemm(true, false, A, H, n, gl, A, top, H, 1.0f, d.policy_weight, H);
    fast_mlp::add_column_sums(gl, n, A, d.policy_bias);
    if (gv != nullptr) {
      cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(n), static_cast<int>(H), 1.0f, top,
                  static_cast<int>(H), gv, 1, 1.0f, d.value_weight, 1);
      fast_mlp::add_column_sums(gv, n, 1, d.value_bias);
    }
    if (hidden == 0) return no_gradients(params.size());
    // ∂h [n, H] = g_logits · W_policy + g_value ⊗ w_value, then layer by
    // layer down: ∂pre = ∂h ⊙ activation', ∂W = ∂preᵀ·input, ∂b = Σ ∂pre,
    // ∂input = ∂pre · W.
    int64_t widest = 1;
    for (int64_t w : net.width) widest = std::max(widest, w);
    std::unique_ptr<float[]> g(new float[n * widest]), g_in(new float[n * widest]);
    gemm(false, false, n, H, A, gl, A, net.policy_weight, H, 0.0f, g.get(), H);
    if (gv != nullptr) {
      cblas_sger(CblasRowMajor, static_cast<int>(n), static_cast<int>(H), 1.0f, gv, 1,
                 net.value_weight, 1, g.get(), static_cast<int>(H));
    }
    for (int64_t l = hidden - 1; l >= 0; --l) {
      const int64_t in = net.width[l], width = net.width[l + 1];
      const float* output = saved[saved.size() - hidden + l].data_ptr<float>();
      const float* input = l > 0 ? saved[saved.size() - hidden + l - 1].data_ptr<float>()
                                 : obs.data_ptr<float>();  // [n, in]
      fast_mlp::activation_backward(g.get(), output, n * width, net.relu);
      gemm(true, false, width, in, n, g.get(), width, input, in, 1.0f, d.weight[l], in);
      fast_mlp::add_column_sums(g.get(), n, width, d.bias[l]);
      if (l == 0) break;
      gemm(false, false, n, in, width, g.get(), width, net.weight[l], in, 0.0f, g_in.get(), in);
      std::swap(g, g_in);
    }
    return no_gradients(params.size());
  }

 private:
  // None for obs, relu and heads, none for the parameters (already in their
  // .grad).
  static variable_list no_gradients(size_t params) { return variable_list(3 + params); }
};

// The MLP's parameters in PolicyNet's order without log_std: the torso's,
// (model.separate_value) the value torso's, the policy head's, the value
// head's; or nothing if the model has others (a CNN torso, a recurrent core).
std::vector<at::Tensor> mlp_parameters(PolicyNetImpl& model) {
  const ModelSpec& spec = model.spec();
  std::vector<at::Tensor> params = model.parameters();
  if (spec.continuous) params.erase(params.begin());  // log_std: the module's own, first
  const size_t value_torso = spec.separate_value ? 2 * spec.value_widths().size() : 0;
  const size_t expected = 2 * spec.hidden.size() + value_torso + 4;
  return params.size() == expected ? params : std::vector<at::Tensor>{};
}

}  // namespace

bool fused_training_applies(PolicyNetImpl& model, const at::Tensor& obs,
                            ModelConfig::FastPath mode) {
  if (mode != ModelConfig::FastPath::kAuto || model.spec().pixels ||
      model.spec().core_hidden != 0 || !obs.device().is_cpu() || obs.scalar_type() != at::kFloat) {
    return false;
  }
  const std::vector<at::Tensor> params = mlp_parameters(model);
  if (params.empty()) return false;
  const auto fusable = [](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
  };
  // The backward pass adds into each .grad as a float buffer, so every
  // parameter must want one.
  return std::all_of(params.begin(), params.end(), [&](const at::Tensor& p) {
    return fusable(p) && p.requires_grad() && (!p.grad().defined() || fusable(p.grad()));
  });
}

PolicyOutput fused_forward(PolicyNetImpl& model, const at::Tensor& obs) {
  const std::vector<at::Tensor> params = mlp_parameters(model);
  const at::Tensor x = obs.reshape({obs.size(0), -1}).contiguous();
  const bool relu = model.spec().activation == ModelConfig::Activation::kRelu;
  PolicyOutput result;
  if (!model.spec().separate_value) {
    const variable_list out = FusedMlp::apply(x, relu, int64_t{2}, at::TensorList(params));
    result.logits = out[0];
    result.value = out[1];
  } else {
    // Two MLPs on the same input, each with one head: the policy's torso and
    // head, the value torso and the value head.
    const size_t torso = 2 * model.spec().hidden.size();
    const size_t value_torso = 2 * model.spec().value_widths().size();
    std::vector<at::Tensor> policy(params.begin(), params.begin() + torso);
    std::vector<at::Tensor> value(params.begin() + torso, params.begin() + torso + value_torso);
    policy.insert(policy.end(), params.end() - 4, params.end() - 2);
    value.insert(value.end(), params.end() - 2, params.end());
    result.logits = FusedMlp::apply(x, relu, int64_t{1}, at::TensorList(policy))[0];
    result.value = FusedMlp::apply(x, relu, int64_t{1}, at::TensorList(value))[0].squeeze(-1);
  }
  if (model.spec().continuous) {
    result.log_std = model.parameters()[0].expand_as(result.logits);  // log_std: first
  }
  return result;
}

}  // namespace pronghorn
