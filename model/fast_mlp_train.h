// The learner's forward pass through the fused MLP path (model.fast_path =
// "auto"): PolicyNet's MLP torso and heads as one autograd function (with
// model.separate_value, one for the policy's torso and head and one for the
// value torso and head), each
// layer one matrix product over all rows (model/fast_gemm.h) plus one
// vectorised element-wise pass (model/fast_mlp_loops.h), instead of several
// LibTorch ops and their autograd nodes per layer.
//
//   forward:  obs [N, in] → layer by layer (activations kept) → logits
//             [N, A] and value [N]
//   backward: ∂/∂W = gᵀ·h, ∂/∂b = Σ g, ∂/∂h = g·W, layer by layer, added
//             into each parameter's .grad by the product itself (β = 1),
//             over the rows up to the last with a nonzero output gradient
//
// (Blocks of 256 rows with the activations recomputed in the backward pass
// were tried first: at a CartPole batch of 1088 rows the extra forward made
// it 0.9× LibTorch; BLAS over whole matrices is faster at every size tried.)
//
// The parameters stay PolicyNet's tensors and the optimizer LibTorch's, so
// gradients land in the same .grad fields (created as zeros where absent,
// also for a head no loss reached, where LibTorch would leave none), the
// optimizer state is LibTorch's, and a checkpoint is the same whichever path
// trained it.
// Writing .grad itself is what backward() does with the MLP's parameters as
// leaves; what else autograd offers is not kept: hooks on the parameters do
// not run, and torch::autograd::grad() would find nothing returned for them
// (the learner uses neither).
// Checked against PolicyNet in float64 by fast_mlp_train_test.cpp.
#pragma once

#include <ATen/ATen.h>

#include "core/config.h"
#include "model/policy.h"

namespace pronghorn {

// Whether fused_forward() may run `model` on `obs`: mode auto, an MLP (no
// pixels, no parameters beyond the MLP's), float32 parameters that require
// gradients and observations on the CPU. The policy face
// (model/policy_face.h) asks, and runs LibTorch's forward where not.
bool fused_training_applies(PolicyNetImpl& model, const at::Tensor& obs,
                            ModelConfig::FastPath mode);

// model->forward(obs) through the fused path, differentiable; obs: [N, obs...]
// float32. Only where fused_training_applies(model, obs, auto).
PolicyOutput fused_forward(PolicyNetImpl& model, const at::Tensor& obs);

}  // namespace pronghorn
