#include "model/network_layout.h"

#include <array>

#include "core/error.h"

namespace pronghorn {

const char* to_string(TorsoLayer::Kind kind) {
  switch (kind) {
    case TorsoLayer::Kind::kLinear:
      return "linear";
    case TorsoLayer::Kind::kConv:
      return "conv";
    case TorsoLayer::Kind::kMaxPool:
      return "max_pool";
    case TorsoLayer::Kind::kResidual:
      return "residual";
    case TorsoLayer::Kind::kRelu:
      return "relu";
    case TorsoLayer::Kind::kTanh:
      return "tanh";
    case TorsoLayer::Kind::kFlatten:
      return "flatten";
  }
  return "?";
}

NetworkLayout network_layout(const ModelSpec& spec) {
  using Kind = TorsoLayer::Kind;
  NetworkLayout layout;
  auto add = [&layout](TorsoLayer layer) {
    layer.name = "torso." + std::to_string(layout.torso.size());  // Sequential's numbering
    layout.torso.push_back(std::move(layer));
  };
  int64_t width = 1;
  if (spec.pixels && spec.cnn == ModelSpec::Cnn::kNature) {
    // The Nature DQN's torso (Mnih et al. 2015): convolutions of 32 8×8
    // filters at stride 4, 64 4×4 at stride 2 and 64 3×3 at stride 1,
    // unpadded, each followed by relu. Its 512-unit layer is model.hidden.
    PRONGHORN_CHECK(spec.obs_shape.size() == 3, "model: pixel observations need [C, H, W]");
    layout.flatten_input = false;
    int64_t channels = spec.obs_shape[0], h = spec.obs_shape[1], w = spec.obs_shape[2];
    for (auto [out, kernel, stride] : {std::array<int64_t, 3>{32, 8, 4}, {64, 4, 2}, {64, 3, 1}}) {
      add({.kind = Kind::kConv, .in = channels, .out = out, .kernel = kernel, .stride = stride});
      add({.kind = Kind::kRelu});
      channels = out;
      h = (h - kernel) / stride + 1;
      w = (w - kernel) / stride + 1;
    }
    PRONGHORN_CHECK(h >= 1 && w >= 1, "model: frames of ", spec.obs_shape[1], "×",
                    spec.obs_shape[2], " are too small for the Nature CNN (36×36 at least)");
    add({.kind = Kind::kFlatten});
    width = channels * h * w;
  } else if (spec.pixels) {
    // The IMPALA CNN (Espeholt et al. 2018): three sections of conv 3×3 →
    // max-pool 3×3 stride 2 → two residual blocks, with 16, 32, 32
    // channels, then relu.
    PRONGHORN_CHECK(spec.obs_shape.size() == 3, "model: pixel observations need [C, H, W]");
    layout.flatten_input = false;
    int64_t channels = spec.obs_shape[0], h = spec.obs_shape[1], w = spec.obs_shape[2];
    for (int64_t out : {16, 32, 32}) {
      add({.kind = Kind::kConv, .in = channels, .out = out, .kernel = 3, .padding = 1});
      add({.kind = Kind::kMaxPool, .in = out, .out = out, .kernel = 3, .stride = 2, .padding = 1});
      for (int block = 0; block < 2; ++block)
        add({.kind = Kind::kResidual, .in = out, .out = out, .kernel = 3, .padding = 1});
      channels = out;
      h = (h - 1) / 2 + 1;  // (h + 2·1 − 3) / 2 + 1
      w = (w - 1) / 2 + 1;
    }
    add({.kind = Kind::kRelu});
    add({.kind = Kind::kFlatten});
    width = channels * h * w;
  } else {
    for (int64_t d : spec.obs_shape) width *= d;
  }
  const Kind activation =
      spec.activation == ModelConfig::Activation::kRelu ? Kind::kRelu : Kind::kTanh;
  const int64_t input_width = width;
  for (int64_t units : spec.hidden) {
    add({.kind = Kind::kLinear, .in = width, .out = units});
    add({.kind = activation});
    width = units;
  }
  if (spec.separate_value) {
    int64_t in = input_width;
    for (int64_t units : spec.value_widths()) {
      for (TorsoLayer layer : {TorsoLayer{.kind = Kind::kLinear, .in = in, .out = units},
                               TorsoLayer{.kind = activation}}) {
        layer.name = "value_torso." + std::to_string(layout.value_torso.size());
        layout.value_torso.push_back(layer);
      }
      in = units;
    }
  }
  layout.torso_width = width;
  layout.core_hidden = spec.core_hidden;
  layout.head_width = spec.core_hidden > 0 ? spec.core_hidden : width;
  // The value torso's last Linear (each is followed by its activation).
  layout.value_width =
      layout.value_torso.empty() ? layout.head_width : layout.value_torso.end()[-2].out;
  return layout;
}

}  // namespace pronghorn
