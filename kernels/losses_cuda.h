// Launchers of the CUDA kernels in losses.cu: raw device pointers and a
// stream in, an error string out (nullptr on success). No LibTorch here.
#pragma once

#include "kernels/loss_math.h"

namespace pronghorn::kernels::cuda {

// One thread per sample; `stream` is a cudaStream_t (nullptr: default).
const char* categorical_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out,
                             void* stream);
const char* gaussian_loss(const LossInputs& in, const LossParams& params, const LossOutputs& out,
                          void* stream);

}  // namespace pronghorn::kernels::cuda
