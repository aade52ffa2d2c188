// An optimizer's state as bytes that depend on the state alone
// (run.deterministic: the same run, the same checkpoint, byte for byte).
// LibTorch's Optimizer::save keys each parameter's state by its tensor's
// address and writes the states in hash-map order, so two processes holding
// the same state write different bytes. These are LibTorch's own archive
// layout (Optimizer::load reads them, as it reads every earlier checkpoint),
// with each parameter keyed by its index ("p0", "p1", …) and the states in
// parameter order.
// Threads: any; the optimizer is only read.
#pragma once

#include <torch/optim/optimizer.h>

#include <string>

namespace pronghorn::learner {

// The archive of `optimizer`, an Adam or RMSprop one (aborts on another kind).
std::string save_optimizer(const torch::optim::Optimizer& optimizer);

}  // namespace pronghorn::learner
