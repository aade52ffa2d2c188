// What ties a checkpoint's parameters to a model (docs/architecture.md §6):
// the model's parameter tensors by name and shape, as a checkpoint writes
// them, and whether a checkpoint's fit a model, naming the first parameter
// that does not. `--resume` (learner/resume.h) and `pronghorn eval` refuse a
// checkpoint that does not fit before touching the model.
#pragma once

#include <string>
#include <vector>

#include "learner/checkpoint.h"

namespace pronghorn {
class PolicyNetImpl;
}

namespace pronghorn::learner {

// The model's parameter tensors by name and shape, from the policy face's
// parameter_list() (model/policy_face.h), in registration order:
// the order of its flat vector (PolicyNetImpl::write_flat).
std::vector<NamedShape> parameter_layout(PolicyNetImpl& model);

// "" when the parameters of `c` fit a model whose layout is `model`: the
// same count and, when `c` names its tensors (format 2), the same names and
// shapes in the same order. Otherwise what does not fit, naming the first
// parameter tensor that differs.
std::string parameters_unfit(const Checkpoint& c, const std::vector<NamedShape>& model);

}  // namespace pronghorn::learner
