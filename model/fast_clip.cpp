#include "model/fast_clip.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "core/hd.h"

namespace pronghorn {
namespace {

PRONGHORN_VECTOR_CLONES
double sum_of_squares(const float* __restrict g, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(g[i]) * g[i];
  return sum;
}

PRONGHORN_VECTOR_CLONES
void scale(float* __restrict g, int64_t n, float by) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) g[i] *= by;
}

bool fusable(const at::Tensor& g) {
  return !g.defined() ||
         (g.device().is_cpu() && g.scalar_type() == at::kFloat && g.is_contiguous());
}

}  // namespace

double fused_clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  if (!std::all_of(params.begin(), params.end(),
                   [](const at::Tensor& p) { return fusable(p.grad()); })) {
    return torch::nn::utils::clip_grad_norm_(params, max_norm);
  }
  double squares = 0;
  for (const at::Tensor& p : params) {
    if (p.grad().defined()) squares += sum_of_squares(p.grad().data_ptr<float>(), p.grad().numel());
  }
  const double norm = std::sqrt(squares);
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient < 1) {  // false for a NaN norm
    for (const at::Tensor& p : params) {
      if (p.grad().defined()) {
        scale(p.grad().data_ptr<float>(), p.grad().numel(), static_cast<float>(coefficient));
      }
    }
  }
  return norm;
}

}  // namespace pronghorn
