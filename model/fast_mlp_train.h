// The learner's forward pass through the fused MLP path (model.fast_path =
// "auto"): PolicyNet's MLP torso and heads as one autograd function whose
// forward and backward run over cache-sized blocks of rows with OpenBLAS
// sgemm and the vectorised loops of model/fast_mlp_loops.h, instead of a
// dozen LibTorch ops and their autograd nodes per layer.
//
//   forward:  obs [N, in] → per block of rows: layers → [N, A + 1]
//   backward: per block of rows: the block's activations recomputed (they
//             stay in cache), then ∂/∂W += gᵀ·h and ∂/∂h = g·W layer by layer
//
// The parameters stay PolicyNet's tensors and the optimizer LibTorch's, so
// gradients land in the same .grad fields, clipping and the optimizer step
// are unchanged, and a checkpoint is the same whichever path trained it.
// Checked against PolicyNet in float64 by fast_mlp_train_test.cpp.
#pragma once

#include <ATen/ATen.h>

#include "core/config.h"
#include "model/policy.h"

namespace pronghorn {

// Whether policy_forward() takes the fused path for `model` on `obs`: mode
// auto, an MLP (no pixels, no parameters beyond the MLP's), float32
// parameters and observations on the CPU.
bool fused_training_applies(PolicyNetImpl& model, const at::Tensor& obs,
                            ModelConfig::FastPath mode);

// model->forward(obs), through the fused path where it applies
// (differentiable either way). obs: [N, obs...].
PolicyOutput policy_forward(PolicyNetImpl& model, const at::Tensor& obs,
                            ModelConfig::FastPath mode);

}  // namespace pronghorn
