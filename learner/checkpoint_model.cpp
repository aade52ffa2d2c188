#include "learner/checkpoint_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/policy_face.h"

namespace pronghorn::learner {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The first parameter tensor where `held` and `model` differ, said in words;
// "" when they agree.
std::string first_difference(const std::vector<NamedShape>& held,
                             const std::vector<NamedShape>& model) {
  for (size_t i = 0; i < std::max(held.size(), model.size()); ++i) {
    if (i >= held.size()) {
      return fmt::format("the model's parameter \"{}\" {} is not in it", model[i].name,
                         shape_text(model[i].shape));
    }
    if (i >= model.size()) {
      return fmt::format("its parameter \"{}\" {} is not the model's", held[i].name,
                         shape_text(held[i].shape));
    }
    if (held[i].name != model[i].name) {
      return fmt::format("parameter tensor {} is \"{}\", the model's is \"{}\"", i, held[i].name,
                         model[i].name);
    }
    if (held[i].shape != model[i].shape) {
      return fmt::format("parameter \"{}\" is {}, the model's is {}", held[i].name,
                         shape_text(held[i].shape), shape_text(model[i].shape));
    }
  }
  return "";
}

}  // namespace

std::vector<NamedShape> parameter_layout(PolicyNetImpl& model) {
  // The policy face's list, the one naming of the flat vector.
  std::vector<NamedShape> layout;
  for (const ParameterEntry& p : parameter_list(model)) layout.push_back({p.name, p.shape});
  return layout;
}

std::string parameters_unfit(const Checkpoint& c, const std::vector<NamedShape>& model) {
  size_t count = 0;
  for (const NamedShape& p : model) {
    size_t n = 1;
    for (int64_t dim : p.shape) n *= static_cast<size_t>(dim);
    count += n;
  }
  // A format-1 checkpoint names nothing: its count is all there is to compare.
  const std::string difference =
      c.parameter_layout.empty() ? "" : first_difference(c.parameter_layout, model);
  if (c.parameters.size() != count) {
    return fmt::format("holds {} parameters, the model has {} (another model or env?){}{}",
                       c.parameters.size(), count, difference.empty() ? "" : ": ", difference);
  }
  return difference;
}

}  // namespace pronghorn::learner
