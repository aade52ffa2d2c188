#include "learner/optimizer_archive.h"

#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>
#include <torch/serialize/output-archive.h>

#include <sstream>

#include "core/error.h"
#include "model/optimizer_state.h"

namespace pronghorn::learner {
namespace {

using torch::serialize::OutputArchive;

// What torch::optim::serialize(archive, optimizer) writes
// (torch/optim/serialize.h), but keyed and ordered by parameter index.
template <typename State, typename Options>
void write_archive(OutputArchive& archive, const torch::optim::Optimizer& optimizer) {
  const auto key = [](size_t group, size_t index) {
    return "p" + std::to_string(group) + "_" + std::to_string(index);
  };
  archive.write("pytorch_version", c10::IValue("1.5.0"));  // the layout's, as LibTorch writes it
  OutputArchive states(archive.compilation_unit());
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<at::Tensor>& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto found = optimizer.state().find(optimizer_state_key(params[i]));
      if (found == optimizer.state().end()) continue;  // not stepped yet
      OutputArchive state(archive.compilation_unit());
      static_cast<const State&>(*found->second).serialize(state);
      states.write(key(g, i), state);
    }
  }
  archive.write("state", states);

  OutputArchive group_list(archive.compilation_unit());
  group_list.write("param_groups/size", torch::tensor(static_cast<int64_t>(groups.size())));
  for (size_t g = 0; g < groups.size(); ++g) {
    OutputArchive group(archive.compilation_unit());
    const std::vector<at::Tensor>& params = groups[g].params();
    group.write("params/size", torch::tensor(static_cast<int64_t>(params.size())));
    for (size_t i = 0; i < params.size(); ++i) {
      group.write("params/" + std::to_string(i), c10::IValue(key(g, i)));
    }
    OutputArchive options(archive.compilation_unit());
    static_cast<const Options&>(groups[g].options()).serialize(options);
    group.write("options", options);
    group_list.write("param_groups/" + std::to_string(g), group);
  }
  archive.write("param_groups", group_list);
}

}  // namespace

std::string save_optimizer(const torch::optim::Optimizer& optimizer) {
  OutputArchive archive;
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr) {
    write_archive<torch::optim::AdamParamState, torch::optim::AdamOptions>(archive, optimizer);
  } else if (dynamic_cast<const torch::optim::RMSprop*>(&optimizer) != nullptr) {
    write_archive<torch::optim::RMSpropParamState, torch::optim::RMSpropOptions>(archive,
                                                                                 optimizer);
  } else {
    PRONGHORN_ASSERT(false, "save_optimizer: expected an Adam or RMSprop optimizer");
  }
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

}  // namespace pronghorn::learner
