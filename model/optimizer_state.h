// Finding a parameter's entry in a LibTorch optimizer's state(), for code
// that reads the state itself: the fused Adam step (model/fast_adam.h) and
// the checks of a checkpoint's optimizer state (learner/resume.cpp).
#pragma once

#include <torch/optim/optimizer.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace pronghorn {

// The key of parameter p's entry in an optimizer's state(): its TensorImpl's
// address, as text in LibTorch 1.x and as the pointer itself in 2.x.
using OptimizerStateKey =
    std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;
template <typename Key = OptimizerStateKey>  // a template, so the branch not taken is not compiled
Key optimizer_state_key(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

}  // namespace pronghorn
