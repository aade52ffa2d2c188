#include "export/policy_description.h"

#include <toml++/toml.h>

#include <cmath>
#include <sstream>

#include "export/onnx_policy.h"
#include "model/network_layout.h"

namespace pronghorn::exporting {
namespace {

toml::array ints(const std::vector<int64_t>& values) {
  toml::array out;
  for (int64_t v : values) out.push_back(v);
  return out;
}

toml::array strings(std::initializer_list<const char*> values) {
  toml::array out;
  for (const char* v : values) out.push_back(std::string(v));
  return out;
}

toml::array bounds(const std::vector<float>& values) {
  toml::array out;
  for (float v : values) out.push_back(static_cast<double>(v));  // finite: EnvSpec checks
  return out;
}

toml::table torso_layer(const TorsoLayer& layer) {
  using Kind = TorsoLayer::Kind;
  toml::table t{{"kind", std::string(to_string(layer.kind))}, {"name", layer.name}};
  switch (layer.kind) {
    case Kind::kLinear:
      t.insert("in", layer.in);
      t.insert("out", layer.out);
      break;
    case Kind::kConv:
    case Kind::kResidual:
    case Kind::kMaxPool:
      t.insert("in", layer.in);
      t.insert("out", layer.out);
      t.insert("kernel", layer.kernel);
      t.insert("stride", layer.stride);
      t.insert("padding", layer.padding);
      break;
    default:
      break;
  }
  return t;
}

}  // namespace

std::string policy_description(const ModelSpec& spec, const EnvSpec& env,
                               const PolicySource& source, bool normalized) {
  const NetworkLayout layout = network_layout(spec);
  const bool pixels = env.obs_dtype == Dtype::kUInt8;
  toml::table observation{
      {"shape", ints(env.obs_shape)},
      {"dtype", std::string(pixels ? "uint8" : "float32")},
      // What the network takes: float32(obs) / divide, then flattened to
      // [batch, ∏shape] when flatten is true (vector observations).
      {"divide", pixels ? 255.0 : 1.0},
      {"flatten", layout.flatten_input},
  };
  if (normalized) {
    // model/observation_norm.h: after the divide, before the flatten.
    observation.insert(
        "normalize",
        toml::table{{"mean", kObservationMeanTensor},
                    {"var", kObservationVarTensor},
                    {"epsilon", 1e-8},  // kObservationEpsilon, a float32 in use
                    {"clip", spec.observation_clip},
                    {"formula", "clip((x - mean) / sqrt(var + epsilon), -clip, clip), float32"}});
  }
  toml::table action;
  if (spec.continuous) {
    action = toml::table{{"kind", "continuous"},
                         {"dims", spec.actions},
                         {"low", bounds(env.action_low)},
                         {"high", bounds(env.action_high)},
                         {"greedy", "the mean, clipped to [low, high]"}};
  } else {
    action = toml::table{{"kind", "discrete"}, {"n", spec.actions}, {"greedy", "argmax of logits"}};
  }
  toml::array torso;
  for (const TorsoLayer& layer : layout.torso) torso.push_back(torso_layer(layer));
  toml::table heads{{"policy", "policy"}, {"value", "value"}, {"width", layout.head_width}};
  if (spec.continuous) heads.insert("log_std", "log_std");
  // model.value_hidden: the value head's input is the value torso's last width.
  if (!layout.value_torso.empty()) heads.insert("value_width", layout.value_width);
  toml::array value_torso;
  for (const TorsoLayer& layer : layout.value_torso) value_torso.push_back(torso_layer(layer));

  toml::table onnx{{"file", "policy.onnx"}, {"opset", kOnnxOpset}};
  toml::array inputs = strings({"obs"}), outputs;
  if (spec.continuous) {
    outputs = strings({"mean", "log_std", "value"});
  } else {
    outputs = strings({"logits", "value"});
  }
  if (layout.core_hidden > 0) {
    inputs.push_back("h_in");
    inputs.push_back("c_in");
    outputs.push_back("h_out");
    outputs.push_back("c_out");
  }
  onnx.insert("inputs", std::move(inputs));
  onnx.insert("outputs", std::move(outputs));

  toml::table doc{
      {"format", "pronghorn-policy"},
      {"format_version", normalized || !layout.value_torso.empty() ? kPolicyFormatVersion
                                                                   : kPolicyFormatVersionPlain},
      {"env", env.name},
      {"observation", std::move(observation)},
      {"action", std::move(action)},
      {"torso", std::move(torso)},
      {"heads", std::move(heads)},
      {"weights", "model.safetensors"},
      {"onnx", std::move(onnx)},
      {"source", toml::table{{"run", source.run_name},
                             {"checkpoint", source.checkpoint},
                             {"env_steps", static_cast<int64_t>(source.env_steps)},
                             {"learner_steps", static_cast<int64_t>(source.learner_steps)},
                             {"pronghorn_version", source.pronghorn_version}}},
  };
  if (!value_torso.empty()) {
    // model.separate_value: the value head takes this MLP's output, run on
    // the same (flattened) observation as the torso, not the torso's.
    doc.insert("value_torso", std::move(value_torso));
  }
  if (layout.core_hidden > 0) {
    // torch.nn.LSTM's cell: gates = x W_ihᵀ + b_ih + h W_hhᵀ + b_hh, split
    // in this order into input, forget, cell and output gates.
    doc.insert("core", toml::table{{"kind", "lstm"},
                                   {"name", "core"},
                                   {"in", layout.torso_width},
                                   {"hidden", layout.core_hidden},
                                   {"gates", "ifgo"}});
  }
  std::ostringstream out;
  out << toml::json_formatter{doc} << "\n";
  return out.str();
}

}  // namespace pronghorn::exporting
