// One Adam step in one vectorised pass per parameter tensor, for the fused
// learner path (model.fast_path = "auto"): LibTorch's Adam::step() runs about
// ten ops per tensor, each a dispatch and a pass over memory, which at a small
// MLP's few thousand weights costs more than the arithmetic.
//
// The step is LibTorch 1.13's Adam (torch/csrc/api/src/optim/adam.cpp), in
// float32 on LibTorch's own state (the AdamParamState entries: step,
// exp_avg, exp_avg_sq; a first step, which creates them, is LibTorch's), so
// optimizer.save() and a checkpoint are the same whichever path stepped, and
// either path continues from the other's state. Checked against Adam::step()
// by fast_adam_test.cpp.
#pragma once

#include <torch/optim/adam.h>

#include "model/optimizer_state.h"

namespace pronghorn {

// Whether fused_adam_step() can take this step: no AMSGrad, and every
// parameter with a gradient float32, contiguous, on the CPU, and past its
// first step.
bool fused_adam_applies(torch::optim::Adam& optimizer);

// optimizer.step(), fused where fused_adam_applies(), else LibTorch's.
void fused_adam_step(torch::optim::Adam& optimizer);

}  // namespace pronghorn
