// CPU face of the fused losses. Categorical: blocks of samples, each step of
// the shared math (loss_math.h) run action by action across the block so the
// compiler vectorises across samples; the CUDA kernel runs the same steps one
// sample per thread (categorical_loss_sample). Gaussian: one sample at a time. Blocks are spread
// over LibTorch's intra-op threads; the loops are multiversioned for AVX-512 and AVX2
// (PRONGHORN_VECTOR_CLONES, core/hd.h).
#include "kernels/losses_cpu.h"

#include <ATen/Parallel.h>

#include <array>
#include <atomic>
#include <vector>

namespace pronghorn::kernels::cpu {
namespace {

constexpr int64_t kBlock = 128;

// Scratch of one block, action-major ([A][kBlock]) so every vector loop is
// unit-stride: the block's logits, then e^(z − max) (reused for p = e/sum,
// so one exp per logit), then the gradient before it is scattered back.
struct BlockScratch {
  explicit BlockScratch(int64_t A) : z(A * kBlock), e(A * kBlock), grad(A * kBlock) {}
  std::vector<float> z, e, grad;
};

// Samples i0 … i0 + n − 1. Returns false, touching nothing, if an action is
// out of range.
template <bool kBehaviour>
inline __attribute__((always_inline)) bool categorical_block(const LossInputs& in,
                                                             const LossParams& p, int64_t i0,
                                                             int64_t n, BlockScratch& scratch,
                                                             const LossOutputs& out) {
  const int64_t A = in.A;
  const float* logits = in.logits + i0 * A;  // [n, A]
  float* __restrict z = scratch.z.data();    // [A][kBlock]
  float* __restrict e = scratch.e.data();
  float* __restrict grad = scratch.grad.data();
  std::array<int32_t, kBlock> action;
  std::array<float, kBlock> action_logit, max, sum, others, log_sum, entropy, g;
  bool valid = true;
  for (int64_t j = 0; j < n; ++j) {  // a gather: scalar, apart from the vector loops
    const int64_t a = in.actions[i0 + j];
    const bool ok = a >= 0 && a < A;
    valid &= ok;
    action[j] = ok ? static_cast<int32_t>(a) : 0;
    action_logit[j] = logits[j * A + action[j]];
  }
  if (!valid) return false;
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t j = 0; j < n; ++j) z[a * kBlock + j] = logits[j * A + a];
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) max[j] = z[j], sum[j] = 0.0f, others[j] = 0.0f;
  for (int64_t a = 1; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) max[j] = max_f(max[j], z[a * kBlock + j]);
  }
  for (int64_t a = 0; a < A; ++a) {  // Σ e^(z − max), and without the action (loss_math.h)
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float ea = fast_exp(z[a * kBlock + j] - max[j]);
      e[a * kBlock + j] = ea;
      sum[j] += ea;
      others[j] += action[j] == a ? 0.0f : ea;
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) log_sum[j] = max[j] + fast_log(sum[j]), entropy[j] = 0.0f;
  for (int64_t a = 0; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float log_p = z[a * kBlock + j] - log_sum[j];
      entropy[j] -= e[a * kBlock + j] / sum[j] * log_p;
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const int64_t i = i0 + j;
    const float log_prob = action_logit[j] - log_sum[j];
    const float log_ratio = kBehaviour ? log_prob - in.behaviour_log_probs[i] : 0.0f;
    const PolicyTerms t = policy_terms(p, in.advantages[i], log_prob, log_ratio);
    g[j] = t.g;
    write_sample_terms(in, p, i, t, entropy[j], out);
  }
  for (int64_t a = 0; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float log_p = z[a * kBlock + j] - log_sum[j];
      grad[a * kBlock + j] =
          categorical_logit_gradient(p, g[j], action[j] == a, others[j] / sum[j],
                                     e[a * kBlock + j] / sum[j], log_p, entropy[j]) *
          p.scale;
    }
  }
  float* grad_out = out.grad_policy + i0 * A;  // [n, A]
  for (int64_t a = 0; a < A; ++a) {
    for (int64_t j = 0; j < n; ++j) grad_out[j * A + a] = grad[a * kBlock + j];
  }
  return true;
}

PRONGHORN_VECTOR_CLONES bool categorical_blocks(const LossInputs& in, const LossParams& p,
                                                int64_t first, int64_t last,
                                                const LossOutputs& out) {
  BlockScratch scratch(in.A);
  bool valid = true;
  for (int64_t k = first; k < last; ++k) {
    const int64_t i0 = k * kBlock;
    const int64_t n = std::min(kBlock, in.N - i0);
    valid &= in.behaviour_log_probs != nullptr
                 ? categorical_block<true>(in, p, i0, n, scratch, out)
                 : categorical_block<false>(in, p, i0, n, scratch, out);
  }
  return valid;
}

PRONGHORN_VECTOR_CLONES void gaussian_samples(const LossInputs& in, const LossParams& p,
                                              int64_t first, int64_t last, const LossOutputs& out) {
  for (int64_t i = first; i < last; ++i) gaussian_loss_sample(in, p, i, out);
}

}  // namespace

bool categorical_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out) {
  const int64_t blocks = (in.N + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, 64 / std::max<int64_t>(1, in.A));
  std::atomic<bool> valid{true};
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    if (!categorical_blocks(in, params, begin, end, out)) valid = false;
  });
  return valid;
}

void gaussian_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out) {
  const int64_t grain = std::max<int64_t>(64, 16384 / std::max<int64_t>(1, in.A));
  at::parallel_for(0, in.N, grain, [&](int64_t begin, int64_t end) {
    gaussian_samples(in, params, begin, end, out);
  });
}

}  // namespace pronghorn::kernels::cpu
