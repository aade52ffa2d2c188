// Gradient clipping by the global L2 norm in one pass per tensor, for the
// fused learner path (model.fast_path = "auto"): LibTorch's clip_grad_norm_
// runs a norm per tensor, a stack, a norm, a clamp and a multiply per tensor,
// each a dispatch, which at a small MLP's few thousand weights costs more than
// the arithmetic.
//
// Same result as torch::nn::utils::clip_grad_norm_(params, max_norm): the
// norm of all the gradients (summed in double here, in float there), and,
// when it exceeds max_norm, every gradient scaled by max_norm / (norm + 1e-6).
// Checked against it by fast_clip_test.cpp.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pronghorn {

// Returns the norm before clipping (NaN or inf if a gradient is; then nothing
// is scaled). Parameters without a gradient are left out; a gradient not
// float32, contiguous and on the CPU sends the call to LibTorch's.
double fused_clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace pronghorn
