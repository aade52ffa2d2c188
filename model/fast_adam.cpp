#include "model/fast_adam.h"

#include <cmath>

#include "core/hd.h"

namespace pronghorn {
namespace {

// The per-element update of Adam::step(), in its order of operations, with
// its scalars computed in double as LibTorch's are (1 − β₂ in float would be
// 1.3e-5 off):
//   m = β₁m + (1 − β₁)g;  v = β₂v + (1 − β₂)g²
//   p −= step_size · m / (√v / √(1 − β₂ᵗ) + ε),  step_size = lr / (1 − β₁ᵗ)
PRONGHORN_VECTOR_CLONES
void adam_update(float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, int64_t n, float beta1, float beta2, float one_minus_beta1,
                 float one_minus_beta2, float root_bc2, float eps, float step_size,
                 float weight_decay) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float grad = g[i] + p[i] * weight_decay;
    m[i] = m[i] * beta1 + grad * one_minus_beta1;
    v[i] = v[i] * beta2 + grad * grad * one_minus_beta2;
    p[i] += -step_size * (m[i] / (__builtin_sqrtf(v[i]) / root_bc2 + eps));
  }
}

bool fusable(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

}  // namespace

bool fused_adam_applies(torch::optim::Adam& optimizer) {
  const auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    if (static_cast<torch::optim::AdamOptions&>(group.options()).amsgrad()) return false;
    for (const at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (!fusable(p) || !fusable(p.grad())) return false;
      // The first step creates the state: LibTorch's own step does that.
      if (states.find(optimizer_state_key(p)) == states.end()) return false;
    }
  }
  return true;
}

void fused_adam_step(torch::optim::Adam& optimizer) {
  if (!fused_adam_applies(optimizer)) {
    optimizer.step();
    return;
  }
  torch::NoGradGuard no_grad;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups()) {
    auto& options = static_cast<torch::optim::AdamOptions&>(group.options());
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& state = static_cast<torch::optim::AdamParamState&>(*states.at(optimizer_state_key(p)));
      state.step(state.step() + 1);
      const double beta1 = std::get<0>(options.betas()), beta2 = std::get<1>(options.betas());
      const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(state.step()));
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(state.step()));
      adam_update(
          p.data_ptr<float>(), p.grad().data_ptr<float>(), state.exp_avg().data_ptr<float>(),
          state.exp_avg_sq().data_ptr<float>(), p.numel(), static_cast<float>(beta1),
          static_cast<float>(beta2), static_cast<float>(1 - beta1), static_cast<float>(1 - beta2),
          static_cast<float>(std::sqrt(bias_correction2)), static_cast<float>(options.eps()),
          static_cast<float>(options.lr() / bias_correction1),
          static_cast<float>(options.weight_decay()));
    }
  }
}

}  // namespace pronghorn
