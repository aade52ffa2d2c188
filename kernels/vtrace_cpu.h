// The CPU loop over kernels/vtrace_math.h (raw pointers, like the CUDA face).
#pragma once

#include "kernels/vtrace_math.h"

namespace pronghorn::kernels::cpu {

// False when an action is outside [0, A): the outputs are then incomplete.
bool advantages(const AdvantageInputs& in, const VtraceParams& params, bool gae,
                const AdvantageOutputs& out);

}  // namespace pronghorn::kernels::cpu
