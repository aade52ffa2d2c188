// The CPU loop over kernels/loss_math.h (raw pointers, like the CUDA face).
#pragma once

#include "kernels/loss_math.h"

namespace pronghorn::kernels::cpu {

void categorical_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out);
void gaussian_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out);

}  // namespace pronghorn::kernels::cpu
