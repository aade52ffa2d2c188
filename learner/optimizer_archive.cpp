#include "learner/optimizer_archive.h"

#include <torch/optim/adam.h>
#include <torch/optim/rmsprop.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <map>
#include <memory>
#include <sstream>

#include "core/error.h"
#include "model/optimizer_state.h"

namespace pronghorn::learner {
namespace {

using torch::serialize::InputArchive;
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

// What torch::optim::serialize(archive, optimizer) reads, matching each saved
// state to its parameter through the group's list of keys, whatever the keys
// are: ours ("p0_3"), or the addresses LibTorch's own Optimizer::save writes.
// (LibTorch 2.x's own reader parses every key as an address, so it refuses
// ours; 1.x's matches them as text.)
template <typename State, typename Options>
void read_archive(InputArchive& archive, torch::optim::Optimizer& optimizer) {
  c10::IValue version;
  archive.read("pytorch_version", version);
  PRONGHORN_CHECK(version.isString() && version.toStringRef() == "1.5.0",
                  "optimizer state: unknown layout version");
  InputArchive states;
  archive.read("state", states);
  std::map<std::string, std::unique_ptr<State>> saved;
  for (const std::string& key : states.keys()) {
    InputArchive one;
    states.read(key, one);
    auto state = std::make_unique<State>();
    state->serialize(one);
    saved[key] = std::move(state);
  }
  InputArchive group_list;
  archive.read("param_groups", group_list);
  at::Tensor group_count;
  group_list.read("param_groups/size", group_count);
  auto& groups = optimizer.param_groups();
  PRONGHORN_CHECK(group_count.item<int64_t>() == static_cast<int64_t>(groups.size()),
                  "optimizer state: ", group_count.item<int64_t>(),
                  " parameter groups, the optimizer has ", groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    InputArchive group;
    group_list.read("param_groups/" + std::to_string(g), group);
    at::Tensor param_count;
    group.read("params/size", param_count);
    const std::vector<at::Tensor>& params = groups[g].params();
    PRONGHORN_CHECK(param_count.item<int64_t>() == static_cast<int64_t>(params.size()),
                    "optimizer state: group ", g, " has ", param_count.item<int64_t>(),
                    " parameters, the optimizer's has ", params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      c10::IValue key;
      group.read("params/" + std::to_string(i), key);
      PRONGHORN_CHECK(key.isString(), "optimizer state: parameter ", i, "'s key is not text");
      auto found = saved.find(key.toStringRef());
      if (found == saved.end()) continue;  // not stepped yet
      optimizer.state()[optimizer_state_key(params[i])] = std::move(found->second);
      saved.erase(found);
    }
    InputArchive options;
    group.read("options", options);
    static_cast<Options&>(groups[g].options()).serialize(options);
  }
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

void load_optimizer(const std::string& bytes, torch::optim::Optimizer& optimizer,
                    const at::Device& device) {
  InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in, device);
  if (dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr) {
    read_archive<torch::optim::AdamParamState, torch::optim::AdamOptions>(archive, optimizer);
  } else if (dynamic_cast<const torch::optim::RMSprop*>(&optimizer) != nullptr) {
    read_archive<torch::optim::RMSpropParamState, torch::optim::RMSpropOptions>(archive, optimizer);
  } else {
    PRONGHORN_ASSERT(false, "load_optimizer: expected an Adam or RMSprop optimizer");
  }
}

}  // namespace pronghorn::learner
