#include "model/activation.h"

#include <torch/csrc/autograd/custom_function.h>

#include "core/fast_math.h"
#include "core/hd.h"

namespace pronghorn {
namespace {

PRONGHORN_VECTOR_CLONES
void tanh_loop(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = fast_tanh(x[i]);
}

at::Tensor tanh_values(const at::Tensor& x) {
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat) return at::tanh(x);
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  tanh_loop(in.data_ptr<float>(), out.data_ptr<float>(), in.numel());
  return out;
}

class Tanh : public torch::autograd::Function<Tanh> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x) {
    at::Tensor y = tanh_values(x);
    ctx->save_for_backward({y});
    return y;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    return {at::tanh_backward(grads[0], ctx->get_saved_variables()[0])};
  }
};

}  // namespace

at::Tensor tanh_activation(const at::Tensor& x) { return Tanh::apply(x); }

}  // namespace pronghorn
