#include "model/policy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace pronghorn {
namespace {

ModelSpec pixel_spec() {
  ModelSpec spec;
  spec.obs_shape = {1, 32, 32};
  spec.pixels = true;
  spec.actions = 3;
  spec.hidden = {256};
  spec.activation = ModelConfig::Activation::kRelu;
  return spec;
}

TEST(ModelTest, ImpalaCnnHasThePapersLayersAndShapes) {
  PolicyNet net(pixel_spec());
  // Per section (in → out channels): conv 3×3 (9·in·out + out), two residual
  // blocks of two convs 3×3 (9·out·out + out each); 32×32 → 16 → 8 → 4.
  auto section = [](int64_t in, int64_t out) {
    return (9 * in * out + out) + 4 * (9 * out * out + out);
  };
  const int64_t torso = section(1, 16) + section(16, 32) + section(32, 32);
  const int64_t fc = 32 * 4 * 4 * 256 + 256;
  const int64_t heads = (256 * 3 + 3) + (256 + 1);
  EXPECT_EQ(net->parameter_count(), torso + fc + heads);

  PolicyOutput out = net->forward(at::rand({5, 1, 32, 32}));
  EXPECT_EQ(out.logits.sizes(), (at::IntArrayRef{5, 3}));
  EXPECT_EQ(out.value.sizes(), (at::IntArrayRef{5}));
  // uint8 frames are scaled by the policy face: PolicyFaceTest.PixelsAreScaledBeforeTheNetwork.
}

TEST(ModelTest, ImpalaCnnMatchesAReferenceBuiltFromItsParameters) {
  PolicyNet net(pixel_spec());
  std::map<std::string, at::Tensor> p;
  for (const auto& item : net->named_parameters()) p[item.key()] = item.value().detach();
  auto conv = [&](const at::Tensor& x, const std::string& name) {
    return at::conv2d(x, p.at(name + ".weight"), p.at(name + ".bias"), 1, 1);
  };
  // Sections at torso.0, torso.4, torso.8: conv, pool, two residual blocks.
  at::Tensor x = at::rand({3, 1, 32, 32});
  at::Tensor h = x;
  for (int section : {0, 4, 8}) {
    h = at::max_pool2d(conv(h, fmt::format("torso.{}", section)), 3, 2, 1);
    for (int block : {section + 2, section + 3}) {
      const std::string b = fmt::format("torso.{}", block);
      h = h + conv(at::relu(conv(at::relu(h), b + ".first")), b + ".second");
    }
  }
  h = at::relu(at::linear(at::relu(h).flatten(1), p.at("torso.14.weight"), p.at("torso.14.bias")));
  at::Tensor logits = at::linear(h, p.at("policy.weight"), p.at("policy.bias"));
  at::Tensor value = at::linear(h, p.at("value.weight"), p.at("value.bias")).squeeze(-1);
  torch::NoGradGuard no_grad;
  PolicyOutput out = net->forward(x);
  EXPECT_TRUE(at::allclose(out.logits, logits, 1e-4, 1e-6));
  EXPECT_TRUE(at::allclose(out.value, value, 1e-4, 1e-6));
}

// The Nature CNN on frames `obs_shape`, its relu layer of `hidden` units.
ModelSpec nature_spec(std::vector<int64_t> obs_shape, int64_t actions, int64_t hidden) {
  ModelSpec spec;
  spec.obs_shape = std::move(obs_shape);
  spec.pixels = true;
  spec.cnn = ModelSpec::Cnn::kNature;
  spec.actions = actions;
  spec.hidden = {hidden};
  spec.activation = ModelConfig::Activation::kRelu;
  return spec;
}

// The Nature DQN's torso (Mnih et al. 2015) on 4 stacked 84×84 frames with
// its 512-unit layer and 18 actions has the paper's 1,693,362 parameters,
// plus our value head.
TEST(ModelTest, NatureCnnHasTheDqnParameterCount) {
  PolicyNet net(nature_spec({4, 84, 84}, 18, 512));
  // conv 8×8 4→32, 4×4 32→64, 3×3 64→64: 84 → 20 → 9 → 7; then 7·7·64 → 512.
  const int64_t dqn = (8 * 8 * 4 * 32 + 32) + (4 * 4 * 32 * 64 + 64) + (3 * 3 * 64 * 64 + 64) +
                      (7 * 7 * 64 * 512 + 512) + (512 * 18 + 18);
  ASSERT_EQ(dqn, 1693362);
  EXPECT_EQ(net->parameter_count(), dqn + 512 + 1);
  PolicyOutput out = net->forward(at::rand({2, 4, 84, 84}));
  EXPECT_EQ(out.logits.sizes(), (at::IntArrayRef{2, 18}));
  EXPECT_EQ(out.value.sizes(), (at::IntArrayRef{2}));
}

// Outputs and every parameter's gradient against the same network written
// with stock ops in float64, on frames that are not square.
TEST(ModelTest, NatureCnnMatchesAStockFloat64ReferenceWithGradients) {
  PolicyNet net(nature_spec({2, 44, 37}, 3, 16));
  {
    torch::NoGradGuard no_grad;  // the policy head's zero biases off zero
    for (auto& p : net->parameters()) p.add_(at::randn_like(p) * 0.05);
  }
  const at::Tensor x = at::rand({5, 2, 44, 37});
  PolicyOutput out = net->forward(x);
  const at::Tensor weights = at::randn({5, 3}), value_weights = at::randn({5});
  ((out.logits * weights).sum() + (out.value * value_weights).sum()).backward();

  std::map<std::string, at::Tensor> p;
  for (const auto& item : net->named_parameters()) {
    p[item.key()] = item.value().detach().to(at::kDouble).requires_grad_(true);
  }
  at::Tensor h = x.to(at::kDouble);
  const std::vector<std::pair<std::string, int64_t>> convs = {
      {"torso.0", 4}, {"torso.2", 2}, {"torso.4", 1}};
  for (const auto& [name, stride] : convs) {
    h = at::relu(at::conv2d(h, p.at(name + ".weight"), p.at(name + ".bias"), stride));
  }
  h = at::relu(at::linear(h.flatten(1), p.at("torso.7.weight"), p.at("torso.7.bias")));
  const at::Tensor logits = at::linear(h, p.at("policy.weight"), p.at("policy.bias"));
  const at::Tensor value = at::linear(h, p.at("value.weight"), p.at("value.bias")).squeeze(-1);
  ((logits * weights.to(at::kDouble)).sum() + (value * value_weights.to(at::kDouble)).sum())
      .backward();

  EXPECT_TRUE(at::allclose(out.logits.to(at::kDouble), logits, 1e-4, 1e-5));
  EXPECT_TRUE(at::allclose(out.value.to(at::kDouble), value, 1e-4, 1e-5));
  int checked = 0;
  for (const auto& item : net->named_parameters()) {
    const at::Tensor want = p.at(item.key()).grad();
    // The layout the fused Adam and the all-reduce read as flat memory.
    EXPECT_TRUE(item.value().grad().is_contiguous()) << item.key();
    const at::Tensor got = item.value().grad().to(at::kDouble);
    const double scale = want.abs().max().item<double>();
    EXPECT_GT(scale, 0) << item.key() << ": a gradient the check would pass anyway";
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-4 * scale + 1e-6) << item.key();
    ++checked;
  }
  EXPECT_EQ(checked, 2 * 6) << "3 convolutions, the hidden layer and 2 heads";
}

// Frames too small for its convolutions are one line naming the env at start.
TEST(ModelTest, NatureCnnRefusesFramesSmallerThan36) {
  EnvSpec env;
  env.name = "pong";
  env.obs_shape = {1, 32, 32};
  env.obs_dtype = Dtype::kUInt8;
  env.action_size = 3;
  ModelConfig config;
  config.kind = ModelConfig::Kind::kNatureCnn;
  try {
    model_spec_for(env, config);
    FAIL() << "32×32 frames accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("env pong gives 32×32 frames"), std::string::npos)
        << e.what();
  }
  env.obs_shape = {1, 36, 36};
  const ModelSpec spec = model_spec_for(env, config);
  EXPECT_TRUE(spec.pixels);
  EXPECT_EQ(spec.cnn, ModelSpec::Cnn::kNature);
  EXPECT_EQ(PolicyNet(spec)->forward(at::rand({1, 1, 36, 36})).logits.sizes(),
            (at::IntArrayRef{1, 3}));
}

// model.value_hidden sizes the value's own torso; without one there is
// nothing to size, which is one line rather than a silently ignored key.
TEST(ModelTest, ValueHiddenSizesTheValueTorsoAndNeedsOne) {
  EnvSpec env;
  env.name = "test";
  env.obs_shape = {3};
  env.action_size = 2;
  ModelConfig config;
  config.hidden = {8, 8};
  config.value_hidden = {16, 4, 6};
  try {
    model_spec_for(env, config);
    FAIL() << "model.value_hidden accepted without model.separate_value";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.value_hidden is set: expected "
                                         "model.separate_value = true"),
              std::string::npos)
        << e.what();
  }
  config.separate_value = true;
  PolicyNet net(model_spec_for(env, config));
  const auto params = net->named_parameters();
  EXPECT_EQ(params["torso.2.weight"].sizes(), (at::IntArrayRef{8, 8}));
  EXPECT_EQ(params["value_torso.0.weight"].sizes(), (at::IntArrayRef{16, 3}));
  EXPECT_EQ(params["value_torso.2.weight"].sizes(), (at::IntArrayRef{4, 16}));
  EXPECT_EQ(params["value_torso.4.weight"].sizes(), (at::IntArrayRef{6, 4}));
  EXPECT_EQ(params["value.weight"].sizes(), (at::IntArrayRef{1, 6}));
  EXPECT_EQ(params["policy.weight"].sizes(), (at::IntArrayRef{2, 8}));
  EXPECT_EQ(net->forward(at::rand({5, 3})).value.sizes(), (at::IntArrayRef{5}));
}

// The MLP's tanh is our own loop with its own autograd: outputs and every
// parameter's gradient against the same network written with stock ops in
// float64.
TEST(ModelTest, TanhMlpMatchesAStockFloat64ReferenceWithGradients) {
  ModelSpec spec;
  spec.obs_shape = {4};
  spec.actions = 3;
  spec.hidden = {64, 64};
  spec.activation = ModelConfig::Activation::kTanh;
  PolicyNet net(spec);
  at::Tensor x = at::randn({257, 4}) * 3;  // spans tanh's linear part and its tails
  PolicyOutput out = net->forward(x);
  at::Tensor weights = at::randn({257, 3}), value_weights = at::randn({257});
  ((out.logits * weights).sum() + (out.value * value_weights).sum()).backward();

  std::map<std::string, at::Tensor> p;
  for (const auto& item : net->named_parameters()) {
    p[item.key()] = item.value().detach().to(at::kDouble).requires_grad_(true);
  }
  at::Tensor h = x.to(at::kDouble);
  for (const char* layer : {"torso.0", "torso.2"}) {
    h = at::tanh(
        at::linear(h, p.at(std::string(layer) + ".weight"), p.at(std::string(layer) + ".bias")));
  }
  at::Tensor logits = at::linear(h, p.at("policy.weight"), p.at("policy.bias"));
  at::Tensor value = at::linear(h, p.at("value.weight"), p.at("value.bias")).squeeze(-1);
  ((logits * weights.to(at::kDouble)).sum() + (value * value_weights.to(at::kDouble)).sum())
      .backward();

  EXPECT_TRUE(at::allclose(out.logits.to(at::kDouble), logits, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(out.value.to(at::kDouble), value, 1e-5, 1e-5));
  for (const auto& item : net->named_parameters()) {
    const at::Tensor want = p.at(item.key()).grad();
    // The layout the fused Adam and the all-reduce read as flat memory.
    EXPECT_TRUE(item.value().grad().is_contiguous()) << item.key();
    const at::Tensor got = item.value().grad().to(at::kDouble);
    const double scale = want.abs().max().item<double>();
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-5 * scale + 1e-6) << item.key();
  }
}

// An MLP over an image env flattens the frames (their scaling is the policy
// face's: PolicyFaceTest.PixelsAreScaledBeforeTheNetwork).
TEST(ModelTest, MlpOverPixelsFlattensThem) {
  ModelSpec spec = pixel_spec();
  spec.pixels = false;  // model.kind = "mlp" on an image env
  PolicyNet net(spec);
  EXPECT_EQ(net->parameter_count(), (1024 * 256 + 256) + (256 * 3 + 3) + (256 + 1));
  EXPECT_EQ(net->forward(at::rand({4, 1, 32, 32})).logits.sizes(), (at::IntArrayRef{4, 3}));
  EXPECT_THROW(net->forward(at::zeros({4, 1, 32, 32}, at::kByte)), Error);
}

// |W Wᵀ − g² I| (rows orthonormal × g) for a wide or square W, |Wᵀ W − g² I|
// for a tall one, in float64; a conv's weight as [out, in·kh·kw].
double orthogonality_error(const at::Tensor& weight, double gain) {
  at::Tensor w = weight.detach().to(at::kDouble).flatten(1);
  if (w.size(0) > w.size(1)) w = w.t();
  const at::Tensor gram = at::mm(w, w.t());
  return (gram - gain * gain * at::eye(w.size(0), at::kDouble)).abs().max().item<double>();
}

TEST(ModelTest, OrthogonalInitGivesEachLayerItsGainAndZeroBiases) {
  ModelSpec mlp;
  mlp.obs_shape = {8};
  mlp.actions = 2;
  mlp.continuous = true;
  mlp.hidden = {64, 32};
  mlp.core_hidden = 16;
  mlp.init = ModelConfig::Init::kOrthogonal;
  mlp.log_std_init = -0.5;
  ModelSpec cnn = pixel_spec();
  cnn.init = ModelConfig::Init::kOrthogonal;
  ModelSpec separate = mlp;
  separate.separate_value = true;  // its value torso: √2 like the policy's
  for (const ModelSpec& spec : {mlp, cnn, separate}) {
    PolicyNet net(spec);
    int weights = 0;
    for (const auto& item : net->named_parameters()) {
      const std::string& name = item.key();
      const at::Tensor& p = item.value();
      if (name == "log_std") {
        EXPECT_TRUE(at::equal(p, at::full({2}, -0.5))) << "model.log_std_init";
      } else if (p.dim() == 1) {
        EXPECT_EQ(p.abs().max().item<float>(), 0.0f) << name;
      } else {
        const double gain = name.starts_with("policy.") ? 0.01
                            : name.starts_with("value.") || name.starts_with("core.")
                                ? 1.0
                                : std::sqrt(2.0);
        EXPECT_LT(orthogonality_error(p, gain), 1e-5 * gain * gain + 1e-6) << name;
        ++weights;
      }
    }
    EXPECT_GE(weights, spec.pixels ? 18 : spec.separate_value ? 8 : 6) << "every weight checked";
  }
  // The default init is not orthogonal (what the option changes).
  ModelSpec plain = mlp;
  plain.init = ModelConfig::Init::kDefault;
  PolicyNet net(plain);
  EXPECT_GT(orthogonality_error(net->named_parameters()["torso.0.weight"], std::sqrt(2.0)), 0.1);
}

// model.separate_value: the value head on an MLP of its own, on the same
// input; a loss on the value reaches none of the policy's parameters, and
// one on the policy none of the value's.
TEST(ModelTest, ASeparateValueNetworkSharesNoParameterWithThePolicy) {
  ModelSpec spec;
  spec.obs_shape = {3};
  spec.actions = 2;
  spec.continuous = true;
  spec.hidden = {8, 8};
  spec.separate_value = true;
  PolicyNet net(spec);
  std::vector<std::string> names;
  for (const auto& item : net->named_parameters()) names.push_back(item.key());
  // LibTorch names a module's own parameters before its children's.
  EXPECT_EQ(names,
            (std::vector<std::string>{"log_std", "torso.0.weight", "torso.0.bias", "torso.2.weight",
                                      "torso.2.bias", "value_torso.0.weight", "value_torso.0.bias",
                                      "value_torso.2.weight", "value_torso.2.bias", "policy.weight",
                                      "policy.bias", "value.weight", "value.bias"}));
  const at::Tensor obs = at::randn({5, 3});
  const auto touched = [&](bool by_value) {
    net->zero_grad();
    const PolicyOutput out = net->forward(obs);
    (by_value ? out.value.sum() : out.logits.sum()).backward();
    std::vector<std::string> with_gradient;
    for (const auto& item : net->named_parameters()) {
      const at::Tensor& g = item.value().grad();
      if (g.defined() && g.abs().sum().item<double>() > 0) with_gradient.push_back(item.key());
    }
    return with_gradient;
  };
  EXPECT_EQ(touched(/*by_value=*/true),
            (std::vector<std::string>{"value_torso.0.weight", "value_torso.0.bias",
                                      "value_torso.2.weight", "value_torso.2.bias", "value.weight",
                                      "value.bias"}));
  EXPECT_EQ(touched(/*by_value=*/false),
            (std::vector<std::string>{"torso.0.weight", "torso.0.bias", "torso.2.weight",
                                      "torso.2.bias", "policy.weight", "policy.bias"}));
  // The value is the value head on the value torso's tanh MLP.
  std::map<std::string, at::Tensor> p;
  for (const auto& item : net->named_parameters()) p[item.key()] = item.value().detach();
  at::Tensor h = at::tanh(at::linear(obs, p["value_torso.0.weight"], p["value_torso.0.bias"]));
  h = at::tanh(at::linear(h, p["value_torso.2.weight"], p["value_torso.2.bias"]));
  const at::Tensor want = at::linear(h, p["value.weight"], p["value.bias"]).squeeze(-1);
  EXPECT_TRUE(at::allclose(net->forward(obs).value.detach(), want, 1e-5, 1e-5));
}

}  // namespace
}  // namespace pronghorn
