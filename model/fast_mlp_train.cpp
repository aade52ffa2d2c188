#include "model/fast_mlp_train.h"

#include <cblas.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

#include "model/fast_mlp_loops.h"

namespace pronghorn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// C [m, n] = alpha·op(A)·op(B) + beta·C, row-major, int sizes for cblas.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
}

// The network as raw pointers: layer l maps width[l] → width[l + 1] with
// weight[l] [width[l + 1], width[l]] and bias[l]; the last layer is the two
// heads packed into one [A + 1, H] (no activation).
struct Net {
  std::vector<int64_t> width;
  std::vector<const float*> weight, bias;
  bool relu = false;
  int64_t layers() const { return static_cast<int64_t>(weight.size()); }
};

// The activations of n rows: act[l] [n, width[l + 1]] for each hidden layer,
// and the head's output into `out` [n, A + 1]. One sgemm per layer over all
// rows (OpenBLAS blocks it for the cache), then one element-wise pass.
void forward_rows(const Net& net, const float* x, int64_t n, const std::vector<float*>& act,
                  float* out) {
  const int64_t L = net.layers();
  for (int64_t l = 0; l < L; ++l) {
    const int64_t in = net.width[l], width = net.width[l + 1];
    float* y = l + 1 < L ? act[l] : out;
    gemm(false, true, n, width, in, x, in, net.weight[l], in, 0.0f, y, width);
    if (l + 1 < L) {
      fast_mlp::bias_activation(y, net.bias[l], n, width, net.relu);
    } else {
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t i = 0; i < width; ++i) y[r * width + i] += net.bias[l][i];
      }
    }
    x = y;
  }
}

class FusedMlp : public torch::autograd::Function<FusedMlp> {
 public:
  // params: the torso's weights and biases, then the policy head's and the
  // value head's (PolicyNet's order, log_std left out). Returns [N, A + 1].
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& obs, bool relu,
                            at::TensorList params) {
    ctx->saved_data["relu"] = relu;
    std::vector<at::Tensor> packed;  // keeps the packed head alive
    const Net net = net_of(params, relu, packed);
    const int64_t N = obs.size(0);
    at::Tensor out = at::empty({N, net.width.back()}, obs.options());
    // The hidden activations, kept for the backward pass (as LibTorch's
    // autograd keeps them): [N, width] per hidden layer.
    std::vector<at::Tensor> saved = {obs};
    saved.insert(saved.end(), params.begin(), params.end());
    std::vector<float*> act;
    for (int64_t l = 0; l + 1 < net.layers(); ++l) {
      saved.push_back(at::empty({N, net.width[l + 1]}, obs.options()));
      act.push_back(saved.back().data_ptr<float>());
    }
    forward_rows(net, obs.data_ptr<float>(), N, act, out.data_ptr<float>());
    ctx->save_for_backward(saved);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor obs = saved[0];
    std::vector<at::Tensor> params(saved.begin() + 1, saved.end());
    const int64_t hidden = static_cast<int64_t>(params.size() - 4) / 3;  // 2 per layer + 1 saved
    std::vector<const float*> act;
    for (int64_t l = 0; l < hidden; ++l)
      act.push_back(params[params.size() - hidden + l].data_ptr<float>());
    params.resize(params.size() - hidden);
    std::vector<at::Tensor> packed;
    const Net net = net_of(params, ctx->saved_data["relu"].toBool(), packed);
    const int64_t L = net.layers(), N = obs.size(0);
    const at::Tensor g_out = grads[0].contiguous();  // [N, A + 1]
    std::vector<at::Tensor> d_weight, d_bias;        // per layer, packed head last
    for (int64_t l = 0; l < L; ++l) {
      d_weight.push_back(at::empty({net.width[l + 1], net.width[l]}, obs.options()));
      d_bias.push_back(at::zeros({net.width[l + 1]}, obs.options()));
    }
    int64_t widest = 1;
    for (int64_t w : net.width) widest = std::max(widest, w);
    std::vector<float> g(N * widest), g_in(N * widest);  // ∂ of a layer's output, its input
    const int64_t n = N;
    const float* x = obs.data_ptr<float>();
    std::copy(g_out.data_ptr<float>(), g_out.data_ptr<float>() + n * net.width.back(), g.begin());
    for (int64_t l = L - 1; l >= 0; --l) {
      const int64_t in = net.width[l], width = net.width[l + 1];
      if (l + 1 < L) fast_mlp::activation_backward(g.data(), act[l], n * width, net.relu);
      const float* input = l > 0 ? act[l - 1] : x;  // [n, in]
      // ∂W [width, in] = gᵀ [width, n] · input [n, in]; ∂b = Σ_rows g.
      gemm(true, false, width, in, n, g.data(), width, input, in, 0.0f,
           d_weight[l].data_ptr<float>(), in);
      fast_mlp::add_column_sums(g.data(), n, width, d_bias[l].data_ptr<float>());
      if (l == 0) break;
      // ∂input [n, in] = g [n, width] · W [width, in].
      gemm(false, false, n, in, width, g.data(), width, net.weight[l], in, 0.0f, g_in.data(), in);
      std::swap(g, g_in);
    }
    // Back into PolicyNet's tensors: torso pairs, then the packed head split
    // into the policy's rows and the value's row.
    variable_list out = {at::Tensor(), at::Tensor()};  // obs, relu
    for (int64_t l = 0; l + 1 < L; ++l) {
      out.push_back(d_weight[l]);
      out.push_back(d_bias[l]);
    }
    const int64_t A = net.width.back() - 1;
    out.push_back(d_weight[L - 1].slice(0, 0, A));
    out.push_back(d_bias[L - 1].slice(0, 0, A));
    out.push_back(d_weight[L - 1].slice(0, A));
    out.push_back(d_bias[L - 1].slice(0, A));
    return out;
  }

 private:
  static Net net_of(at::TensorList params, bool relu, std::vector<at::Tensor>& packed) {
    Net net;
    net.relu = relu;
    const int64_t hidden = static_cast<int64_t>(params.size()) / 2 - 2;
    net.width.push_back(params[0].size(1));
    for (int64_t l = 0; l < hidden; ++l) {
      net.weight.push_back(params[2 * l].data_ptr<float>());
      net.bias.push_back(params[2 * l + 1].data_ptr<float>());
      net.width.push_back(params[2 * l].size(0));
    }
    // The heads as one layer: policy rows then the value row.
    const size_t p = 2 * hidden;
    packed = {at::cat({params[p], params[p + 2]}, 0).contiguous(),
              at::cat({params[p + 1], params[p + 3]}, 0).contiguous()};
    net.weight.push_back(packed[0].data_ptr<float>());
    net.bias.push_back(packed[1].data_ptr<float>());
    net.width.push_back(packed[0].size(0));
    return net;
  }
};

// The MLP's parameters in PolicyNet's order without log_std, or nothing if
// the model has others (a CNN torso, a recurrent core).
std::vector<at::Tensor> mlp_parameters(PolicyNetImpl& model) {
  const ModelSpec& spec = model.spec();
  std::vector<at::Tensor> params = model.parameters();
  if (spec.continuous) params.erase(params.begin());  // log_std: the module's own, first
  const size_t expected = 2 * spec.hidden.size() + 4;
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
  return std::all_of(params.begin(), params.end(), [](const at::Tensor& p) {
    return p.device().is_cpu() && p.scalar_type() == at::kFloat && p.is_contiguous();
  });
}

PolicyOutput policy_forward(PolicyNetImpl& model, const at::Tensor& obs,
                            ModelConfig::FastPath mode) {
  if (!fused_training_applies(model, obs, mode)) return model.forward(obs);
  const std::vector<at::Tensor> params = mlp_parameters(model);
  const at::Tensor x = obs.reshape({obs.size(0), -1}).contiguous();
  const at::Tensor out = FusedMlp::apply(
      x, model.spec().activation == ModelConfig::Activation::kRelu, at::TensorList(params));
  const int64_t A = model.spec().actions;
  PolicyOutput result;
  result.logits = out.slice(1, 0, A);
  result.value = out.select(1, A);
  if (model.spec().continuous) {
    result.log_std = model.parameters()[0].expand_as(result.logits);  // log_std: first
  }
  return result;
}

}  // namespace pronghorn
