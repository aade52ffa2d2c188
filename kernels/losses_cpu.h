// The CPU loop over kernels/loss_math.h (raw pointers, like the CUDA face).
#pragma once

#include "kernels/loss_math.h"

namespace pronghorn::kernels::cpu {

// False, with nothing written for the offending samples, when an action is
// outside [0, A).
bool categorical_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out);
void gaussian_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out);

}  // namespace pronghorn::kernels::cpu
