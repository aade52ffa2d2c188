// CPU face of V-trace / GAE(λ): the shared math of vtrace_math.h, run row by
// row over a block of columns (rather than column by column, as the CUDA
// kernel does) so the compiler vectorises each step across columns; blocks
// are spread over LibTorch's intra-op threads. The log-softmax of a row of
// columns runs action by action for the same reason, and finishes with the
// shared log_softmax_finish.
#include "kernels/vtrace_cpu.h"

#include <ATen/Parallel.h>

#include <array>
#include <atomic>

namespace pronghorn::kernels::cpu {
namespace {

constexpr int64_t kBlock = 256;  // columns per block: carries and log-ratios stay in L1

// log(π/μ) of columns row … row + n − 1 from the target logits. False if an
// action is outside [0, A) (nothing is read out of bounds).
inline __attribute__((always_inline)) bool log_rhos_of_row(const AdvantageInputs& in, int64_t row,
                                                           int64_t n, float* log_rho) {
  const int64_t A = in.A;
  const float* z = in.target_logits + row * A;  // [n, A]
  std::array<float, kBlock> max, sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) max[j] = z[j * A], sum[j] = 0.0f;
  for (int64_t a = 1; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) max[j] = max_f(max[j], z[j * A + a]);
  }
  for (int64_t a = 0; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) sum[j] += fast_exp(z[j * A + a] - max[j]);
  }
  std::array<float, kBlock> action_logit;  // a gather: scalar, apart from the vector loop
  bool valid = true;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t a = in.actions[row + j];
    const bool ok = a >= 0 && a < A;
    valid &= ok;
    action_logit[j] = z[j * A + (ok ? a : 0)];
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    log_rho[j] =
        log_softmax_finish(action_logit[j], max[j], sum[j]) - in.behaviour_log_probs[row + j];
  }
  return valid;
}

template <bool kGae, bool kTruncation>
inline __attribute__((always_inline)) bool scan_block(const AdvantageInputs& in,
                                                      const VtraceParams& params, int64_t b0,
                                                      int64_t b1, const AdvantageOutputs& out) {
  // The carries as columns (not an array of ScanCarry): unit-stride vectors.
  std::array<float, kBlock> next_value, next_vs, carry, log_rho;
  const int64_t n = b1 - b0;
  for (int64_t j = 0; j < n; ++j) {
    const ScanCarry c = scan_start(in, b0 + j);
    next_value[j] = c.next_value, next_vs[j] = c.next_vs, carry[j] = c.carry;
  }
  for (int64_t t = in.T - 1; t >= 0; --t) {
    const int64_t row = t * in.B + b0;
    if (in.log_rhos != nullptr) {
      for (int64_t j = 0; j < n; ++j) log_rho[j] = in.log_rhos[row + j];
    } else if (!log_rhos_of_row(in, row, n, log_rho.data())) {
      return false;
    }
    // `omp simd`: the rows of inputs and outputs never overlap, which the
    // compiler cannot prove from the pointers alone.
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      ScanCarry c{next_value[j], next_vs[j], carry[j]};
      const float cut = kTruncation ? in.truncated[row + j] : 0.0f;
      const float final_value = kTruncation ? in.final_values[row + j] : 0.0f;
      scan_step(in, params, kGae, row + j, log_rho[j], cut, final_value, c, out);
      next_value[j] = c.next_value, next_vs[j] = c.next_vs, carry[j] = c.carry;
    }
  }
  return true;
}

// The block loop, multiversioned (core/hd.h).
PRONGHORN_VECTOR_CLONES bool scan_blocks(const AdvantageInputs& in, const VtraceParams& params,
                                         bool gae, int64_t first, int64_t last,
                                         const AdvantageOutputs& out) {
  const bool truncation = in.truncated != nullptr;
  bool valid = true;
  for (int64_t k = first; k < last && valid; ++k) {
    const int64_t b0 = k * kBlock, b1 = std::min(in.B, b0 + kBlock);
    if (gae) {
      valid = truncation ? scan_block<true, true>(in, params, b0, b1, out)
                         : scan_block<true, false>(in, params, b0, b1, out);
    } else {
      valid = truncation ? scan_block<false, true>(in, params, b0, b1, out)
                         : scan_block<false, false>(in, params, b0, b1, out);
    }
  }
  return valid;
}

}  // namespace

bool advantages(const AdvantageInputs& in, const VtraceParams& params, bool gae,
                const AdvantageOutputs& out) {
  const int64_t blocks = (in.B + kBlock - 1) / kBlock;
  // A block costs about kBlock·T·(A + 10) flops; a few blocks per task.
  const int64_t grain =
      std::max<int64_t>(1, 262144 / (kBlock * std::max<int64_t>(1, in.T) * (in.A + 10)));
  std::atomic<bool> valid{true};
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    if (!scan_blocks(in, params, gae, begin, end, out)) valid = false;
  });
  return valid;
}

}  // namespace pronghorn::kernels::cpu
