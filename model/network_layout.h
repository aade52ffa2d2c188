// The policy network's layers as data (model/policy.h builds its modules
// from this list, in this order): what an export describes and rebuilds
// outside LibTorch (export/: the JSON description, the ONNX graph, the NumPy
// loader). Each layer names the parameters it owns as named_parameters()
// names them ("torso.0.weight"), so the numbers in a checkpoint or a
// safetensors file find their layer by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/policy.h"

namespace pronghorn {

struct TorsoLayer {
  enum class Kind {
    kLinear,    // y = x Wᵀ + b: W [out, in], b [out]
    kConv,      // 2-D convolution, kernel × kernel at `stride`, zero `padding`:
                // W [out, in, k, k], b [out]
    kMaxPool,   // max over kernel × kernel windows at `stride`, padding never the max
    kResidual,  // x + conv(relu(conv(relu(x)))), two kConv of `out` channels: name.first,
                // name.second
    kRelu,
    kTanh,
    kFlatten,  // [N, C, H, W] → [N, C·H·W]
  };
  Kind kind;
  std::string name{};       // the module's: "torso.3"; its parameters are name + ".weight", ".bias"
  int64_t in = 0, out = 0;  // features (linear) or channels (conv)
  int64_t kernel = 0, stride = 1, padding = 0;  // conv, residual, max-pool
};

const char* to_string(TorsoLayer::Kind kind);

struct NetworkLayout {
  // Vector observations [N, obs...] enter the torso flattened to [N, ∏obs]
  // (before it, not as a layer: the layer numbering predates this list);
  // images [N, C, H, W] as they are.
  bool flatten_input = true;
  std::vector<TorsoLayer> torso;
  // model.separate_value: the value head's own MLP ("value_torso.N"), on the
  // same flattened input, of the torso's widths; empty: the value head sits
  // on the torso (or the core) as the policy head does.
  std::vector<TorsoLayer> value_torso;
  int64_t torso_width = 0;  // features out of the torso
  int64_t core_hidden = 0;  // the LSTM core's width (parameters "core.weight_ih" …); 0 = none
  int64_t head_width = 0;   // features into the heads: core_hidden, else torso_width
  int64_t value_width = 0;  // features into the value head: the value torso's, else head_width
};

// The layers `spec` makes, in PolicyNetImpl's order.
NetworkLayout network_layout(const ModelSpec& spec);

}  // namespace pronghorn
