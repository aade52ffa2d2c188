// CPU face of the fused losses: the per-sample math of loss_math.h over
// LibTorch's intra-op threads.
#include <ATen/Parallel.h>

#include "kernels/losses_cpu.h"

namespace pronghorn::kernels::cpu {
namespace {

int64_t grain(const LossInputs& in) { return std::max<int64_t>(64, 16384 / std::max<int64_t>(1, in.A)); }

}  // namespace

void categorical_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out) {
  at::parallel_for(0, in.N, grain(in), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) categorical_loss_sample(in, params, i, out);
  });
}

void gaussian_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out) {
  at::parallel_for(0, in.N, grain(in), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) gaussian_loss_sample(in, params, i, out);
  });
}

}  // namespace pronghorn::kernels::cpu
