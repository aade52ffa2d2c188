// model.normalize_observations: the running statistics against a float64
// reference of the pooled mean and variance, the normalisation against its
// formula, and the policy face applying the statistics that travel with a
// policy version, alike on the fused and the LibTorch path.
#include "model/observation_norm.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "model/policy_face.h"
#include "model/testing/test_envs.h"

namespace pronghorn {
namespace {

constexpr auto kAuto = ModelConfig::FastPath::kAuto;
constexpr auto kOff = ModelConfig::FastPath::kOff;

// The reference: everything seen pooled at once, in float64, with the prior
// as kObservationPriorCount observations at mean 0 and variance 1 (the prior's
// own spread counted as its variance times its count).
struct Pooled {
  std::vector<double> mean, var;
};
Pooled pooled(const std::vector<std::vector<float>>& batches, int64_t d) {
  const double prior = kObservationPriorCount;
  double n = prior;
  std::vector<double> sum(d, 0.0);
  for (const auto& b : batches) {
    for (size_t i = 0; i < b.size(); ++i) sum[i % d] += b[i];
    n += static_cast<double>(b.size() / d);
  }
  Pooled p{std::vector<double>(d), std::vector<double>(d)};
  for (int64_t j = 0; j < d; ++j) p.mean[j] = sum[j] / n;
  std::vector<double> squares(d, 0.0);
  for (const auto& b : batches) {
    for (size_t i = 0; i < b.size(); ++i) {
      const double delta = b[i] - p.mean[i % d];
      squares[i % d] += delta * delta;
    }
  }
  // The prior's observations: variance 1 about mean 0, so about p.mean
  // their squared deviations are 1 + mean² each.
  for (int64_t j = 0; j < d; ++j) {
    p.var[j] = (squares[j] + prior * (1.0 + p.mean[j] * p.mean[j])) / n;
  }
  return p;
}

std::vector<float> random_rows(int64_t n, int64_t d, double scale, double shift, int64_t seed) {
  torch::manual_seed(seed);
  const at::Tensor t = at::randn({n, d}) * scale + shift;
  return {t.data_ptr<float>(), t.data_ptr<float>() + n * d};
}

TEST(ObservationNormTest, RunningStatisticsMatchThePooledFloat64Reference) {
  const int64_t d = 3;
  ObservationStats stats(d);
  std::vector<std::vector<float>> seen;
  // Batches of different sizes, one far off the origin (a MuJoCo position)
  // so that a sum-of-squares shortcut would cancel.
  for (auto [n, scale, shift] :
       {std::tuple{50, 1.0, 0.0}, {7, 3.0, 100.0}, {300, 0.1, -2.0}, {1, 5.0, 1e4}}) {
    seen.push_back(random_rows(n, d, scale, shift, n));
    stats.update(seen.back().data(), n);
    const Pooled want = pooled(seen, d);
    for (int64_t j = 0; j < d; ++j) {
      EXPECT_NEAR(stats.mean[j], want.mean[j], 1e-9 * (1 + std::abs(want.mean[j]))) << j;
      EXPECT_NEAR(stats.var[j], want.var[j], 1e-9 * (1 + want.var[j])) << j;
    }
  }
  EXPECT_DOUBLE_EQ(stats.count, kObservationPriorCount + 50 + 7 + 300 + 1);
}

TEST(ObservationNormTest, NormalisationIsTheFormulaOnBothImplementationsBitForBit) {
  const int64_t n = 40, d = 5;
  const std::vector<float> rows = random_rows(n, d, 4.0, 1.0, 11);
  const std::vector<float> mean = {0.5f, -1.0f, 2.0f, 0.0f, 100.0f};
  const std::vector<float> var = {1.0f, 0.25f, 9.0f, 0.0f, 1e-4f};
  const float clip = 3.0f;
  std::vector<float> looped(n * d);
  normalize_rows(rows.data(), looped.data(), n, d, mean.data(), var.data(), clip);
  const at::Tensor tensor =
      normalize_observations(at::from_blob(const_cast<float*>(rows.data()), {n, d}),
                             at::tensor(mean), at::tensor(var), clip);
  int clipped = 0;
  for (int64_t i = 0; i < n * d; ++i) {
    const int64_t j = i % d;
    const double want =
        std::clamp((rows[i] - double{mean[j]}) / std::sqrt(var[j] + 1e-8), -3.0, 3.0);
    EXPECT_NEAR(looped[i], want, 1e-5 * (1 + std::abs(want))) << i;
    EXPECT_EQ(looped[i], tensor.data_ptr<float>()[i]) << i;
    clipped += std::abs(looped[i]) == clip;
  }
  EXPECT_GT(clipped, 10);  // the clip was exercised
}

using testing::vector_env;

ModelConfig normalising() {
  ModelConfig config;
  config.normalize_observations = true;
  config.observation_clip = 5.0;
  return config;
}

// A policy version with statistics far from the identity, as the learner
// publishes it.
std::vector<float> published_version(const EnvSpec& env, int64_t seed) {
  torch::manual_seed(seed);
  PolicyNet net(model_spec_for(env, normalising()));
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : net->parameters()) p.copy_(at::randn_like(p) * 0.4);
  ObservationStats stats(4);
  stats.mean = {3.0, -2.0, 0.5, 10.0};
  stats.var = {4.0, 0.01, 1.0, 25.0};
  net->set_observation_statistics(stats);
  std::vector<float> flat(net->published_count());
  net->write_published(flat.data());
  return flat;
}

TEST(ObservationNormTest, APublishedVersionCarriesItsStatisticsAfterTheParameters) {
  const EnvSpec env = vector_env(false);
  PolicyNet net(model_spec_for(env, normalising()));
  EXPECT_EQ(net->published_count(), net->parameter_count() + 2 * 4);
  PolicyNet plain(model_spec_for(env, {}));
  EXPECT_EQ(plain->published_count(), plain->parameter_count());
  const std::vector<float> flat = published_version(env, 1);
  const float* stats = flat.data() + net->parameter_count();
  EXPECT_EQ(std::vector<float>(stats, stats + 8),
            (std::vector<float>{3, -2, 0.5, 10, 4, 0.01f, 1, 25}));
  // A fresh model starts at the statistics' start: mean 0, variance 1.
  EXPECT_TRUE(at::equal(net->observation_mean(), at::zeros({4})));
  EXPECT_TRUE(at::equal(net->observation_var(), at::ones({4})));
  net->read_published(flat.data());
  EXPECT_TRUE(at::equal(net->observation_var(), at::tensor({4.0f, 0.01f, 1.0f, 25.0f})));
}

// The actors' view: a version loaded into either path acts and values as
// the network on observations normalised by hand.
TEST(ObservationNormTest, BothInferencePathsApplyTheLoadedStatistics) {
  for (bool continuous : {false, true}) {
    const EnvSpec env = vector_env(continuous);
    const int64_t K = 17;
    const std::vector<float> flat = published_version(env, 2);
    PolicyNet reference(model_spec_for(env, {}));  // no statistics of its own
    reference->read_flat(flat.data());
    const at::Tensor obs = at::randn({K, 4}) * 5 + 2;
    const at::Tensor by_hand = ((obs - at::tensor({3.0f, -2.0f, 0.5f, 10.0f})) /
                                (at::tensor({4.0f, 0.01f, 1.0f, 25.0f}) + 1e-8).sqrt())
                                   .clamp(-5, 5);
    const at::Tensor want = reference->forward(by_hand).value;
    for (auto mode : {kAuto, kOff}) {
      InferencePolicy policy(PolicyNet(model_spec_for(env, normalising())), env, K, mode, 1);
      ASSERT_EQ(policy.fused(), mode == kAuto);
      ASSERT_EQ(policy.published_count(), static_cast<int64_t>(flat.size()));
      policy.load(flat.data());
      std::vector<float> got(K);
      policy.values(obs.data_ptr<float>(), got.data());
      for (int64_t k = 0; k < K; ++k) {
        EXPECT_NEAR(got[k], want[k].item<float>(), 1e-5) << k << " fused " << policy.fused();
      }
    }
  }
}

// The learner's view: both training paths' forward normalises with the
// model's statistics.
TEST(ObservationNormTest, BothTrainingPathsApplyTheModelsStatistics) {
  const EnvSpec env = vector_env(true);
  const std::vector<float> flat = published_version(env, 3);
  const at::Tensor obs = at::randn({3, 5, 4}) * 4;  // [S, N, obs]
  std::vector<at::Tensor> values;
  for (auto mode : {kAuto, kOff}) {
    ModelConfig config = normalising();
    config.fast_path = mode;
    PolicyNet net(model_spec_for(env, config));
    net->read_published(flat.data());
    TrainingPolicy policy(net, at::kCPU, config, LearnerConfig{});
    values.push_back(policy.forward(obs, {}, {}).value.detach());
  }
  PolicyNet reference(model_spec_for(env, {}));
  reference->read_flat(flat.data());
  PolicyNet normalised(model_spec_for(env, normalising()));
  normalised->read_published(flat.data());
  const at::Tensor want =
      reference->forward(preprocess_observations(obs.flatten(0, 1), *normalised)).value;
  EXPECT_TRUE(at::allclose(values[0], want, 1e-5, 1e-5));
  EXPECT_TRUE(at::allclose(values[1], want, 1e-5, 1e-5));
}

TEST(ObservationNormTest, DroppedStatisticsApplyNone) {
  const EnvSpec env = vector_env(false);
  PolicyNet net(model_spec_for(env, normalising()));
  net->drop_observation_statistics();
  const at::Tensor obs = at::randn({6, 4}) * 50;
  EXPECT_TRUE(at::equal(preprocess_observations(obs, *net), obs));  // not even clipped
}

TEST(ObservationNormTest, ImageObservationsAreRefusedWithTheReason) {
  EnvSpec pixels;
  pixels.name = "pixels";
  pixels.obs_dtype = Dtype::kUInt8;
  pixels.obs_shape = {1, 16, 16};
  pixels.action_size = 3;
  try {
    model_spec_for(pixels, normalising());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.normalize_observations"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("pixels"), std::string::npos);
  }
}

}  // namespace
}  // namespace pronghorn
