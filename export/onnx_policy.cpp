#include "export/onnx_policy.h"

#include <fmt/format.h>

#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "export/policy_description.h"
#include "model/network_layout.h"
#include "proto/onnx.pb.h"

namespace pronghorn::exporting {
namespace {

namespace pb = pronghorn::onnx;
using Attribute = pb::AttributeProto;

Attribute int_attribute(const char* name, int64_t value) {
  Attribute a;
  a.set_name(name);
  a.set_type(Attribute::INT);
  a.set_i(value);
  return a;
}

Attribute ints_attribute(const char* name, std::vector<int64_t> values) {
  Attribute a;
  a.set_name(name);
  a.set_type(Attribute::INTS);
  for (int64_t v : values) a.add_ints(v);
  return a;
}

// The graph as it grows: nodes in order, each output a fresh name unless the
// graph's own output is wanted.
class GraphBuilder {
 public:
  GraphBuilder(pb::GraphProto& graph, const Safetensors& weights)
      : graph_(graph), weights_(weights) {}

  std::string node(const char* op, std::vector<std::string> inputs,
                   std::vector<Attribute> attributes = {}, std::string output = {}) {
    if (output.empty()) output = fmt::format("{}_{}", op, graph_.node_size());
    pb::NodeProto& n = *graph_.add_node();
    n.set_op_type(op);
    n.set_name(fmt::format("{}_{}", op, graph_.node_size() - 1));
    for (std::string& in : inputs) n.add_input(std::move(in));
    n.add_output(output);
    for (Attribute& a : attributes) *n.add_attribute() = std::move(a);
    return output;
  }

  // Split's outputs: `count` fresh names.
  std::vector<std::string> split(const std::string& x, const std::string& sizes, int count) {
    pb::NodeProto& n = *graph_.add_node();
    n.set_op_type("Split");
    n.set_name(fmt::format("Split_{}", graph_.node_size() - 1));
    n.add_input(x);
    n.add_input(sizes);
    *n.add_attribute() = int_attribute("axis", 1);
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
      out.push_back(fmt::format("{}_part{}", n.name(), i));
      n.add_output(out.back());
    }
    return out;
  }

  // The parameter `name` as an initializer of that name (or `as`), once,
  // checked to be `shape`.
  std::string parameter(const std::string& name, const std::vector<int64_t>& shape,
                        std::string as = {}) {
    if (as.empty()) as = name;
    const NamedTensor* t = weights_.find(name);
    PRONGHORN_CHECK(t != nullptr, "export: the weights have no tensor ", name);
    PRONGHORN_CHECK(t->shape == shape, "export: tensor ", name, " has shape ", shape_text(t->shape),
                    ", the network wants ", shape_text(shape));
    if (added_.insert(as).second) add_initializer(as, pb::TensorProto::FLOAT, shape, t->bytes);
    return as;
  }

  std::string constant_float(const std::string& name, float value) {
    add_initializer(name, pb::TensorProto::FLOAT, {},
                    std::string(reinterpret_cast<char*>(&value), 4));
    return name;
  }

  std::string constant_ints(const std::string& name, const std::vector<int64_t>& values) {
    add_initializer(name, pb::TensorProto::INT64, {static_cast<int64_t>(values.size())},
                    std::string(reinterpret_cast<const char*>(values.data()), 8 * values.size()));
    return name;
  }

 private:
  void add_initializer(const std::string& name, pb::TensorProto::DataType type,
                       const std::vector<int64_t>& shape, std::string bytes) {
    pb::TensorProto& t = *graph_.add_initializer();
    t.set_name(name);
    t.set_data_type(type);
    for (int64_t d : shape) t.add_dims(d);
    t.set_raw_data(std::move(bytes));
  }

  pb::GraphProto& graph_;
  const Safetensors& weights_;
  std::set<std::string> added_;
};

void add_value_info(google::protobuf::RepeatedPtrField<pb::ValueInfoProto>& to,
                    const std::string& name, pb::TensorProto::DataType type,
                    const std::vector<int64_t>& rest) {  // after the batch dimension
  pb::ValueInfoProto& v = *to.Add();
  v.set_name(name);
  pb::TypeProto::Tensor& t = *v.mutable_type()->mutable_tensor_type();
  t.set_elem_type(type);
  t.mutable_shape()->add_dim()->set_dim_param("batch");
  for (int64_t d : rest) t.mutable_shape()->add_dim()->set_dim_value(d);
}

std::string conv(GraphBuilder& g, const std::string& x, const TorsoLayer& layer,
                 const std::string& name, int64_t in) {
  const int64_t k = layer.kernel, p = layer.padding, s = layer.stride;
  return g.node("Conv",
                {x, g.parameter(name + ".weight", {layer.out, in, k, k}),
                 g.parameter(name + ".bias", {layer.out})},
                {ints_attribute("kernel_shape", {k, k}), ints_attribute("strides", {s, s}),
                 ints_attribute("pads", {p, p, p, p})});
}

std::string torso_layer(GraphBuilder& g, const std::string& x, const TorsoLayer& layer) {
  using Kind = TorsoLayer::Kind;
  switch (layer.kind) {
    case Kind::kLinear:
      return g.node("Gemm",
                    {x, g.parameter(layer.name + ".weight", {layer.out, layer.in}),
                     g.parameter(layer.name + ".bias", {layer.out})},
                    {int_attribute("transB", 1)});
    case Kind::kConv:
      return conv(g, x, layer, layer.name, layer.in);
    case Kind::kMaxPool: {
      const int64_t k = layer.kernel, p = layer.padding, s = layer.stride;
      return g.node("MaxPool", {x},
                    {ints_attribute("kernel_shape", {k, k}), ints_attribute("strides", {s, s}),
                     ints_attribute("pads", {p, p, p, p})});
    }
    case Kind::kResidual: {
      std::string r = g.node("Relu", {x});
      r = conv(g, r, layer, layer.name + ".first", layer.out);
      r = g.node("Relu", {r});
      r = conv(g, r, layer, layer.name + ".second", layer.out);
      return g.node("Add", {x, r});
    }
    case Kind::kRelu:
      return g.node("Relu", {x});
    case Kind::kTanh:
      return g.node("Tanh", {x});
    case Kind::kFlatten:
      return g.node("Flatten", {x}, {int_attribute("axis", 1)});
  }
  throw Error("export: unknown torso layer");
}

// One LSTM step with torch's gate order (i, f, g, o); h_out and c_out.
std::string lstm_step(GraphBuilder& g, const std::string& x, int64_t in, int64_t H) {
  const std::string from_x = g.node(
      "Gemm", {x, g.parameter("core.weight_ih", {4 * H, in}), g.parameter("core.bias_ih", {4 * H})},
      {int_attribute("transB", 1)});
  const std::string from_h = g.node(
      "Gemm",
      {"h_in", g.parameter("core.weight_hh", {4 * H, H}), g.parameter("core.bias_hh", {4 * H})},
      {int_attribute("transB", 1)});
  const std::vector<std::string> gates =
      g.split(g.node("Add", {from_x, from_h}), g.constant_ints("gate_sizes", {H, H, H, H}), 4);
  const std::string i = g.node("Sigmoid", {gates[0]}), f = g.node("Sigmoid", {gates[1]});
  const std::string cell = g.node("Tanh", {gates[2]}), o = g.node("Sigmoid", {gates[3]});
  const std::string c =
      g.node("Add", {g.node("Mul", {f, "c_in"}), g.node("Mul", {i, cell})}, {}, "c_out");
  return g.node("Mul", {o, g.node("Tanh", {c})}, {}, "h_out");
}

}  // namespace

std::string onnx_policy(const ModelSpec& spec, const EnvSpec& env, const Safetensors& weights,
                        const std::string& description, const std::string& producer_version) {
  pb::ModelProto model;
  model.set_ir_version(kOnnxIrVersion);
  pb::OperatorSetIdProto& opset = *model.add_opset_import();
  opset.set_domain("");
  opset.set_version(kOnnxOpset);
  model.set_producer_name("pronghorn");
  model.set_producer_version(producer_version);
  model.set_doc_string(description);
  pb::GraphProto& graph = *model.mutable_graph();
  graph.set_name("pronghorn_policy");
  GraphBuilder g(graph, weights);

  const NetworkLayout layout = network_layout(spec);
  const bool pixels = env.obs_dtype == Dtype::kUInt8;
  add_value_info(*graph.mutable_input(), "obs",
                 pixels ? pb::TensorProto::UINT8 : pb::TensorProto::FLOAT, env.obs_shape);
  std::string x = "obs";
  if (pixels) {  // preprocess_observations()'s x / 255 (model/policy_face.h)
    x = g.node("Cast", {x}, {int_attribute("to", pb::TensorProto::FLOAT)});
    x = g.node("Div", {x, g.constant_float("pixel_scale", 255.0f)});
  }
  if (weights.find(kObservationMeanTensor) != nullptr) {  // model/observation_norm.h
    const float clip = static_cast<float>(spec.observation_clip);
    const std::string scale = g.node(
        "Sqrt", {g.node("Add", {g.parameter(kObservationVarTensor, env.obs_shape),
                                g.constant_float("observation_epsilon", kObservationEpsilon)})});
    x = g.node("Div",
               {g.node("Sub", {x, g.parameter(kObservationMeanTensor, env.obs_shape)}), scale});
    x = g.node("Clip", {x, g.constant_float("observation_clip_low", -clip),
                        g.constant_float("observation_clip_high", clip)});
  }
  if (layout.flatten_input) x = g.node("Flatten", {x}, {int_attribute("axis", 1)});
  std::string value_x = x;  // model.separate_value: the value torso on the same input
  for (const TorsoLayer& layer : layout.value_torso) value_x = torso_layer(g, value_x, layer);
  for (const TorsoLayer& layer : layout.torso) x = torso_layer(g, x, layer);
  if (layout.core_hidden > 0) {
    const int64_t H = layout.core_hidden;
    add_value_info(*graph.mutable_input(), "h_in", pb::TensorProto::FLOAT, {H});
    add_value_info(*graph.mutable_input(), "c_in", pb::TensorProto::FLOAT, {H});
    x = lstm_step(g, x, layout.torso_width, H);
  }

  if (layout.value_torso.empty()) value_x = x;  // the value head on the policy's features
  const int64_t A = spec.actions, W = layout.head_width;
  const std::string head = spec.continuous ? "mean" : "logits";
  g.node("Gemm", {x, g.parameter("policy.weight", {A, W}), g.parameter("policy.bias", {A})},
         {int_attribute("transB", 1)}, head);
  add_value_info(*graph.mutable_output(), head, pb::TensorProto::FLOAT, {A});
  if (spec.continuous) {
    // The output takes the name "log_std"; its parameter is renamed (a name
    // is one value in a graph).
    g.node("Expand", {g.parameter("log_std", {A}, "log_std_parameter"), g.node("Shape", {head})},
           {}, "log_std");
    add_value_info(*graph.mutable_output(), "log_std", pb::TensorProto::FLOAT, {A});
  }
  const std::string v = g.node("Gemm",
                               {value_x, g.parameter("value.weight", {1, layout.value_width}),
                                g.parameter("value.bias", {1})},
                               {int_attribute("transB", 1)});
  g.node("Squeeze", {v, g.constant_ints("value_axes", {1})}, {}, "value");
  add_value_info(*graph.mutable_output(), "value", pb::TensorProto::FLOAT, {});
  if (layout.core_hidden > 0) {
    add_value_info(*graph.mutable_output(), "h_out", pb::TensorProto::FLOAT, {layout.core_hidden});
    add_value_info(*graph.mutable_output(), "c_out", pb::TensorProto::FLOAT, {layout.core_hidden});
  }
  std::string bytes;
  PRONGHORN_CHECK(model.SerializeToString(&bytes), "export: the ONNX model did not serialise");
  return bytes;
}

}  // namespace pronghorn::exporting
