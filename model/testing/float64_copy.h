// The float64 reference of a PolicyNet for tests: the same module and
// parameters, in double.
#pragma once

#include <torch/torch.h>

#include "model/policy.h"

namespace pronghorn::testing {

inline PolicyNet float64_copy(PolicyNet& net) {
  PolicyNet copy(net->spec());
  copy->to(at::kDouble);
  torch::NoGradGuard no_grad;
  const auto from = net->parameters();
  auto to = copy->parameters();
  for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  return copy;
}

}  // namespace pronghorn::testing
