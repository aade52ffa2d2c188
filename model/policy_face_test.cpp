// The policy face (model/policy_face.h): which path each half takes, that
// both paths act and train alike on the same weights, the recurrent core's
// state per env, observation preprocessing and the named parameter list.
// The fused code itself is checked against PolicyNet in fast_mlp_test.cpp,
// fast_mlp_train_test.cpp, fast_adam_test.cpp and fast_clip_test.cpp.
#include "model/policy_face.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "model/testing/test_envs.h"

namespace pronghorn {
namespace {

constexpr auto kAuto = ModelConfig::FastPath::kAuto;
constexpr auto kOff = ModelConfig::FastPath::kOff;

using testing::vector_env;

EnvSpec pixel_env() {
  EnvSpec env;
  env.name = "pixels";
  env.obs_dtype = Dtype::kUInt8;
  env.obs_shape = {1, 16, 16};
  env.action_size = 3;
  return env;
}

// Parameters drawn at random, so that a wrong head or layer shows.
PolicyNet random_net(const EnvSpec& env, ModelConfig config, int64_t seed) {
  torch::manual_seed(seed);
  PolicyNet net(model_spec_for(env, config));
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : net->parameters()) p.copy_(at::randn_like(p) * 0.4);
  return net;
}

ModelConfig lstm_config() {
  ModelConfig config;
  config.hidden = {8};
  config.core = ModelConfig::Core::kLstm;
  config.core_hidden = 5;
  return config;
}

TEST(PolicyFaceTest, TheFusedPathRunsMlpsOnFloatVectorsWithModeAutoOnly) {
  const EnvSpec env = vector_env(false);
  PolicyNet mlp = random_net(env, {}, 1);
  EXPECT_TRUE(InferencePolicy(mlp, env, 4, kAuto, 1).fused());
  EXPECT_FALSE(InferencePolicy(mlp, env, 4, kOff, 1).fused());
  PolicyNet lstm = random_net(env, lstm_config(), 1);
  EXPECT_FALSE(InferencePolicy(lstm, env, 4, kAuto, 1).fused());
  ModelConfig separate;
  separate.separate_value = true;  // a value torso of its own: fused too
  PolicyNet two_torsos = random_net(env, separate, 1);
  EXPECT_TRUE(InferencePolicy(two_torsos, env, 4, kAuto, 1).fused());
  EXPECT_THROW(model_spec_for(env,
                              [] {
                                ModelConfig c = lstm_config();
                                c.separate_value = true;
                                return c;
                              }()),
               Error);
  ModelConfig mlp_on_pixels;
  mlp_on_pixels.kind = ModelConfig::Kind::kMlp;
  PolicyNet over_bytes = random_net(pixel_env(), mlp_on_pixels, 1);
  EXPECT_FALSE(InferencePolicy(over_bytes, pixel_env(), 4, kAuto, 1).fused());
  PolicyNet cnn = random_net(pixel_env(), {}, 1);
  EXPECT_FALSE(InferencePolicy(cnn, pixel_env(), 4, kAuto, 1).fused());
}

TEST(PolicyFaceTest, BothInferencePathsActAndValueAlike) {
  for (bool continuous : {false, true}) {
    for (bool separate : {false, true}) {  // model.separate_value
      const EnvSpec env = vector_env(continuous);
      const int64_t K = 33, D = env.action_size;
      ModelConfig config;
      config.separate_value = separate;
      PolicyNet net = random_net(env, config, 2);
      InferencePolicy fused(net, env, K, kAuto, 7), stock(net, env, K, kOff, 7);
      ASSERT_TRUE(fused.fused());
      const at::Tensor obs = at::randn({K, 4});
      std::vector<int32_t> a_fused(K), a_stock(K);
      std::vector<float> lp_fused(K), lp_stock(K), c_fused(K * D), c_stock(K * D);
      std::vector<float> clipped(K * D);
      auto into = [&](std::vector<int32_t>& a, std::vector<float>& lp, std::vector<float>& c) {
        ActionsOut out{.log_probs = lp.data()};
        if (continuous) {
          out.continuous = c.data(), out.clipped = clipped.data();
        } else {
          out.discrete = a.data();
        }
        return out;
      };
      fused.act(obs.data_ptr<float>(), /*greedy=*/true, into(a_fused, lp_fused, c_fused));
      stock.act(obs.data_ptr<float>(), /*greedy=*/true, into(a_stock, lp_stock, c_stock));
      std::vector<float> v_fused(K), v_stock(K);
      fused.values(obs.data_ptr<float>(), v_fused.data());
      stock.values(obs.data_ptr<float>(), v_stock.data());
      for (int64_t k = 0; k < K; ++k) {
        if (!continuous) {
          EXPECT_EQ(a_fused[k], a_stock[k]) << k;
        }
        EXPECT_NEAR(lp_fused[k], lp_stock[k], 1e-4) << k;
        EXPECT_NEAR(v_fused[k], v_stock[k], 1e-4) << k;
      }
      for (int64_t i = 0; i < K * D && continuous; ++i) {
        EXPECT_NEAR(c_fused[i], c_stock[i], 1e-4);
      }
    }
  }
}

// load() replaces the weights on either path: acting after it is acting
// with the new weights.
TEST(PolicyFaceTest, LoadTakesTheFlatWeightsOnEitherPath) {
  const EnvSpec env = vector_env(false);
  const int64_t K = 9;
  PolicyNet from = random_net(env, {}, 3), target = random_net(env, {}, 4);
  std::vector<float> flat(from->parameter_count());
  from->write_flat(flat.data());
  const at::Tensor obs = at::randn({K, 4});
  std::vector<float> want(K);
  InferencePolicy(from, env, K, kOff, 1).values(obs.data_ptr<float>(), want.data());
  for (auto mode : {kAuto, kOff}) {
    InferencePolicy policy(random_net(env, {}, 5), env, K, mode, 1);
    policy.load(flat.data());
    std::vector<float> got(K);
    policy.values(obs.data_ptr<float>(), got.data());
    for (int64_t k = 0; k < K; ++k) EXPECT_NEAR(got[k], want[k], 1e-5) << k;
  }
}

// A recurrent core carries each env's state from act() to act(); values()
// leaves it; reset_ended() zeroes only the envs that ended, reset() all.
TEST(PolicyFaceTest, TheRecurrentCoreIsCarriedAndResetPerEnv) {
  const EnvSpec env = vector_env(false);
  const int64_t K = 4, H = 5;
  PolicyNet net = random_net(env, lstm_config(), 6);
  InferencePolicy policy(net, env, K, kAuto, 1);
  ASSERT_FALSE(policy.fused());
  std::vector<float> state(2 * K * H, -1.0f);
  policy.write_core_state(state.data());
  for (float x : state) EXPECT_EQ(x, 0.0f);

  const at::Tensor obs = at::randn({K, 4});
  std::vector<int32_t> actions(K);
  policy.act(obs.data_ptr<float>(), true, {.discrete = actions.data()});
  CoreState expected = net->initial_state(K);
  {
    torch::NoGradGuard no_grad;
    net->forward(obs, expected);
  }
  std::vector<float> values(K);
  policy.values(obs.data_ptr<float>(), values.data());  // must not move the state
  policy.write_core_state(state.data());
  const at::Tensor got = at::from_blob(state.data(), {2, K, H});
  EXPECT_TRUE(at::allclose(got[0], expected.h)) << got[0] << expected.h;
  EXPECT_TRUE(at::allclose(got[1], expected.c));

  const std::vector<uint8_t> terminated = {0, 1, 0, 0}, truncated = {0, 0, 0, 1};
  policy.reset_ended(terminated.data(), truncated.data());
  policy.write_core_state(state.data());
  for (int64_t k = 0; k < K; ++k) {
    const bool ended = k == 1 || k == 3;
    for (int64_t part = 0; part < 2; ++part) {
      const at::Tensor row = at::from_blob(state.data() + (part * K + k) * H, {H});
      const at::Tensor want = (part == 0 ? expected.h : expected.c)[k];
      EXPECT_TRUE(ended ? row.abs().max().item<float>() == 0.0f : at::allclose(row, want)) << k;
    }
  }
  policy.reset();
  policy.write_core_state(state.data());
  for (float x : state) EXPECT_EQ(x, 0.0f);
}

// uint8 pixels reach the network scaled to [0, 1], on both halves, for the
// CNN and for an MLP over pixels (which stays on LibTorch).
TEST(PolicyFaceTest, PixelsAreScaledBeforeTheNetwork) {
  ModelConfig mlp;
  mlp.kind = ModelConfig::Kind::kMlp;
  mlp.hidden = {16};
  for (const ModelConfig& config : {ModelConfig{}, mlp}) {
    const EnvSpec env = pixel_env();
    const int64_t K = 5;
    PolicyNet net = random_net(env, config, 8);
    const at::Tensor frames = at::randint(0, 256, {K, 1, 16, 16}).to(at::kByte);
    const at::Tensor scaled = frames.to(at::kFloat).div(255);
    at::Tensor want;
    {
      torch::NoGradGuard no_grad;
      want = net->forward(scaled).value;
    }
    InferencePolicy policy(net, env, K, kAuto, 1);
    std::vector<float> values(K);
    policy.values(frames.data_ptr<uint8_t>(), values.data());
    EXPECT_TRUE(at::allclose(at::from_blob(values.data(), {K}), want));

    LearnerConfig learner;
    TrainingPolicy training(net, at::kCPU, config, learner);
    const PolicyOutput out = training.forward(frames.unsqueeze(0), at::Tensor(), at::Tensor());
    EXPECT_TRUE(at::allclose(out.value.detach(), want));
  }
}

// The CNN's pixels are scaled in one pass into channels-last memory: exactly
// LibTorch's x / 255 at every pixel, for one, three and four channels; an MLP
// over pixels takes them in their own layout.
TEST(PolicyFaceTest, CnnPixelsArriveScaledInChannelsLastMemory) {
  for (const int64_t channels : {1, 3, 4}) {
    EnvSpec env = pixel_env();
    env.obs_shape = {channels, 12, 10};
    PolicyNet cnn = random_net(env, {}, 2);
    const at::Tensor frames = at::randint(0, 256, {3, channels, 12, 10}).to(at::kByte);
    const at::Tensor input = preprocess_observations(frames, *cnn);
    EXPECT_TRUE(input.is_contiguous(at::MemoryFormat::ChannelsLast)) << channels;
    EXPECT_TRUE(at::equal(input, frames.to(at::kFloat).div_(255.0))) << channels;
  }
  ModelConfig mlp;
  mlp.kind = ModelConfig::Kind::kMlp;
  mlp.hidden = {16};
  PolicyNet over_pixels = random_net(pixel_env(), mlp, 2);
  const at::Tensor frames = at::randint(0, 256, {3, 1, 16, 16}).to(at::kByte);
  const at::Tensor input = preprocess_observations(frames, *over_pixels);
  EXPECT_TRUE(input.is_contiguous());
  EXPECT_TRUE(at::equal(input, frames.to(at::kFloat).div_(255.0)));
}

// One step of each training path from the same weights: forward, a loss
// reaching every output, backward, clipping (which bites) and the optimizer
// step land on the same weights.
TEST(PolicyFaceTest, BothTrainingPathsTakeTheSameStep) {
  for (auto optimizer : {LearnerConfig::Optimizer::kAdam, LearnerConfig::Optimizer::kRmsprop}) {
    const EnvSpec env = vector_env(true);
    PolicyNet start = random_net(env, {}, 9);
    std::vector<float> flat(start->parameter_count());
    start->write_flat(flat.data());
    const at::Tensor obs = at::randn({3, 11, 4});  // [S, N, obs]
    LearnerConfig learner;
    learner.optimizer = optimizer;
    std::vector<at::Tensor> after;
    std::vector<double> norms;
    for (auto mode : {kAuto, kOff}) {
      ModelConfig config;
      config.fast_path = mode;
      PolicyNet net(start->spec());
      net->read_flat(flat.data());
      TrainingPolicy policy(net, at::kCPU, config, learner);
      for (int step = 0; step < 2; ++step) {  // the second Adam step is the fused one
        policy.zero_grad();
        const PolicyOutput out = policy.forward(obs, at::Tensor(), at::Tensor());
        EXPECT_EQ(out.logits.sizes(), (at::IntArrayRef{33, 2}));
        (out.logits.pow(2).sum() + out.value.sum() + out.log_std.sum()).backward();
        norms.push_back(policy.clip_gradients(0.5));
        policy.step(0.01);
      }
      std::vector<float> now(flat.size());
      net->write_flat(now.data());
      after.push_back(at::tensor(now));
    }
    EXPECT_GT(norms[0], 0.5) << "clipping must bite";
    EXPECT_NEAR(norms[0], norms[2], 1e-3 * norms[0]);
    EXPECT_NEAR(norms[1], norms[3], 1e-3 * norms[1]);
    EXPECT_TRUE(at::allclose(after[0], after[1], 1e-4, 1e-5));
    EXPECT_FALSE(at::allclose(after[0], at::tensor(flat))) << "the weights must move";
  }
}

TEST(PolicyFaceTest, ARecurrentModelTrainsFromTheStoredCoreState) {
  const EnvSpec env = vector_env(false);
  PolicyNet net = random_net(env, lstm_config(), 10);
  TrainingPolicy policy(net, at::kCPU, lstm_config(), LearnerConfig{});
  const at::Tensor obs = at::randn({3, 2, 4}), ended = at::zeros({2, 2}, at::kByte);
  EXPECT_THROW(policy.forward(obs, at::Tensor(), ended), Error);
  const at::Tensor state = at::randn({2, 2, 5});
  CoreState core{state[0], state[1]};
  const PolicyOutput want = net->forward_sequence(obs, core, ended);
  const PolicyOutput got = policy.forward(obs, state, ended);
  EXPECT_TRUE(at::allclose(got.logits, want.logits));
}

// Names as LibTorch's named_parameters() gives them, in the flat vector's
// order, each at its offset: the Gaussian's log_std first, then the layers.
TEST(PolicyFaceTest, TheParameterListNamesTheFlatVector) {
  const EnvSpec env = vector_env(true);
  ModelConfig config;
  config.hidden = {6};
  PolicyNet net = random_net(env, config, 11);
  const std::vector<ParameterEntry> list = parameter_list(*net);
  std::vector<std::string> names;
  for (const ParameterEntry& p : list) names.push_back(p.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"log_std", "torso.0.weight", "torso.0.bias", "policy.weight",
                                      "policy.bias", "value.weight", "value.bias"}));
  EXPECT_EQ(list[1].shape, (std::vector<int64_t>{6, 4}));
  std::vector<float> flat(net->parameter_count());
  net->write_flat(flat.data());
  int64_t offset = 0;
  const auto params = net->parameters();
  for (size_t i = 0; i < list.size(); ++i) {
    EXPECT_EQ(list[i].offset, offset) << list[i].name;
    EXPECT_EQ(list[i].numel, params[i].numel()) << list[i].name;
    const at::Tensor stored = at::from_blob(flat.data() + offset, params[i].sizes());
    EXPECT_TRUE(at::equal(stored, params[i].detach())) << list[i].name;
    offset += list[i].numel;
  }
  EXPECT_EQ(offset, net->parameter_count());
}

}  // namespace
}  // namespace pronghorn
