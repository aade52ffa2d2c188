// CPU face of V-trace / GAE(λ): the shared column scan of vtrace_math.h,
// columns spread over LibTorch's intra-op threads. The executable spec the
// CUDA kernel is compared with.
#include <ATen/Parallel.h>

#include "kernels/vtrace_cpu.h"

namespace pronghorn::kernels::cpu {

void advantages(const AdvantageInputs& in, const VtraceParams& params, bool gae,
                const AdvantageOutputs& out) {
  // A column costs about T·(A + 10) flops; aim for chunks of ~32k of them.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, in.T * (in.A + 10)));
  at::parallel_for(0, in.B, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) advantage_column(in, params, gae, b, out);
  });
}

}  // namespace pronghorn::kernels::cpu
