// An optimizer's state as bytes that depend on the state alone
// (run.deterministic: the same run, the same checkpoint, byte for byte).
// LibTorch's Optimizer::save keys each parameter's state by its tensor's
// address and writes the states in hash-map order, so two processes holding
// the same state write different bytes. These are LibTorch's own archive
// layout, with each parameter keyed by its index ("p0_0", "p0_1", …) and the
// states in parameter order. load_optimizer reads them, and LibTorch's own
// archives; LibTorch 1.x's Optimizer::load reads both too, 2.x's only its own
// (it parses each key as an address).
// Threads: any; the optimizer is only read.
#pragma once

#include <torch/optim/optimizer.h>

#include <string>

namespace pronghorn::learner {

// The archive of `optimizer`, an Adam or RMSprop one (aborts on another kind).
std::string save_optimizer(const torch::optim::Optimizer& optimizer);

// The state save_optimizer (or LibTorch's Optimizer::save) wrote of an
// optimizer of the same kind and parameter shapes, into `optimizer`, its
// tensors on `device`. Throws Error, or c10::Error from the archive, on bytes
// that are not such a state. Threads: the optimizer's owner.
void load_optimizer(const std::string& bytes, torch::optim::Optimizer& optimizer,
                    const at::Device& device);

}  // namespace pronghorn::learner
