// The layers an export describes are the network PolicyNet builds: every
// parameter the layout names exists with the shape the layer implies, and
// every parameter of the model is named by some layer, for each kind of
// network; the ONNX graph takes each of them once. (Numbers are checked end
// to end in tests/export_test.cpp, against the binary's own forward pass.)
#include "model/network_layout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "core/error.h"
#include "export/onnx_policy.h"
#include "export/policy_description.h"
#include "export/policy_export.h"
#include "model/policy_face.h"
#include "proto/onnx.pb.h"

namespace pronghorn::exporting {
namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

// The parameters the layout says the network has, by name and shape.
Shapes layout_parameters(const ModelSpec& spec) {
  const NetworkLayout layout = network_layout(spec);
  Shapes out;
  std::vector<TorsoLayer> layers = layout.torso;
  layers.insert(layers.end(), layout.value_torso.begin(), layout.value_torso.end());
  for (const TorsoLayer& l : layers) {
    switch (l.kind) {
      case TorsoLayer::Kind::kLinear:
        out[l.name + ".weight"] = {l.out, l.in};
        out[l.name + ".bias"] = {l.out};
        break;
      case TorsoLayer::Kind::kConv:
        out[l.name + ".weight"] = {l.out, l.in, l.kernel, l.kernel};
        out[l.name + ".bias"] = {l.out};
        break;
      case TorsoLayer::Kind::kResidual:
        for (const char* conv : {".first", ".second"}) {
          out[l.name + conv + ".weight"] = {l.out, l.out, l.kernel, l.kernel};
          out[l.name + conv + ".bias"] = {l.out};
        }
        break;
      default:
        break;
    }
  }
  const int64_t H = layout.core_hidden, W = layout.head_width;
  if (H > 0) {
    out["core.weight_ih"] = {4 * H, layout.torso_width};
    out["core.weight_hh"] = {4 * H, H};
    out["core.bias_ih"] = {4 * H};
    out["core.bias_hh"] = {4 * H};
  }
  out["policy.weight"] = {spec.actions, W};
  out["policy.bias"] = {spec.actions};
  // The value head on the value torso's last Linear (model.value_hidden), if any.
  int64_t value_in = W;
  for (const TorsoLayer& l : layout.value_torso) {
    if (l.kind == TorsoLayer::Kind::kLinear) value_in = l.out;
  }
  out["value.weight"] = {1, value_in};
  out["value.bias"] = {1};
  if (spec.continuous) out["log_std"] = {spec.actions};
  return out;
}

struct Case {
  const char* name;
  ModelSpec spec;
  EnvSpec env;
};

EnvSpec env_of(std::vector<int64_t> shape, int64_t actions, Dtype dtype = Dtype::kFloat32) {
  EnvSpec env;
  env.name = "test";
  env.obs_dtype = dtype;
  env.obs_shape = std::move(shape);
  env.action_size = actions;
  return env;
}

Case make_case(const char* name, EnvSpec env, ModelConfig config) {
  return {name, model_spec_for(env, config), env};
}

std::vector<Case> cases() {
  ModelConfig mlp;
  ModelConfig relu;
  relu.hidden = {8};
  relu.activation = ModelConfig::Activation::kRelu;
  ModelConfig cnn;
  cnn.kind = ModelConfig::Kind::kImpalaCnn;
  cnn.hidden = {16};
  ModelConfig nature = cnn;
  nature.kind = ModelConfig::Kind::kNatureCnn;
  ModelConfig lstm;
  lstm.hidden = {16};
  lstm.core = ModelConfig::Core::kLstm;
  lstm.core_hidden = 8;
  ModelConfig separate;
  separate.separate_value = true;
  ModelConfig value_hidden = separate;
  value_hidden.value_hidden = {5, 7, 3};
  EnvSpec continuous = env_of({3}, 1);
  continuous.action_kind = ActionKind::kContinuous;
  continuous.action_low = {-2};
  continuous.action_high = {2};
  return {
      make_case("mlp", env_of({4}, 2), mlp),
      make_case("relu_mlp_of_a_matrix", env_of({2, 2}, 2), relu),
      make_case("impala_cnn", env_of({3, 32, 32}, 3, Dtype::kUInt8), cnn),
      make_case("nature_cnn", env_of({4, 40, 36}, 3, Dtype::kUInt8), nature),
      make_case("lstm", env_of({4}, 2), lstm),
      make_case("gaussian", continuous, mlp),
      make_case("separate_value", continuous, separate),
      make_case("value_hidden", continuous, value_hidden),
  };
}

TEST(NetworkLayoutTest, NamesEveryParameterOfTheNetworkWithItsShape) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    PolicyNet model(c.spec);
    Shapes actual;
    for (const ParameterEntry& p : parameter_list(*model)) actual[p.name] = p.shape;
    EXPECT_EQ(layout_parameters(c.spec), actual);
  }
}

TEST(NetworkLayoutTest, OnnxGraphTakesEachParameterOnceAndNamesItsInputsAndOutputs) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    PolicyNet model(c.spec);
    const Safetensors weights = policy_weights(*model, {});
    onnx::ModelProto proto;
    ASSERT_TRUE(proto.ParseFromString(onnx_policy(c.spec, c.env, weights, "doc", "0")));
    EXPECT_EQ(proto.opset_import(0).version(), kOnnxOpset);
    std::set<std::string> initializers;
    for (const auto& t : proto.graph().initializer()) initializers.insert(t.name());
    for (const NamedTensor& t : weights.tensors) {
      EXPECT_TRUE(initializers.count(t.name == "log_std" ? "log_std_parameter" : t.name)) << t.name;
    }
    std::vector<std::string> inputs, outputs;
    for (const auto& v : proto.graph().input()) inputs.push_back(v.name());
    for (const auto& v : proto.graph().output()) outputs.push_back(v.name());
    const bool lstm = c.spec.core_hidden > 0;
    const std::vector<std::string> expected_inputs =
        lstm ? std::vector<std::string>{"obs", "h_in", "c_in"} : std::vector<std::string>{"obs"};
    EXPECT_EQ(inputs, expected_inputs);
    std::vector<std::string> expected = c.spec.continuous
                                            ? std::vector<std::string>{"mean", "log_std", "value"}
                                            : std::vector<std::string>{"logits", "value"};
    if (lstm) expected.insert(expected.end(), {"h_out", "c_out"});
    EXPECT_EQ(outputs, expected);
    const std::string json = policy_description(c.spec, c.env, {}, /*normalized=*/false);
    EXPECT_NE(json.find("\"format\" : \"pronghorn-policy\""), std::string::npos) << json;
  }
}

TEST(NetworkLayoutTest, OnnxRefusesWeightsThatDoNotFitTheNetwork) {
  const Case c = cases()[0];
  PolicyNet model(c.spec);
  Safetensors weights = policy_weights(*model, {});
  weights.tensors.back().shape = {2};  // value.bias [1] → [2]
  std::string error;
  try {
    onnx_policy(c.spec, c.env, weights, "", "0");
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("tensor value.bias has shape [2], the network wants [1]"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace pronghorn::exporting
