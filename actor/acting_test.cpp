// ActingLoop::run with env.splits: the overlapped order (split s's next step
// acted while the splits after it still step) gives what one split gives,
// row for row: actions, log-probs, observations, flags, V(final obs) where a
// time limit cut, the episodes heard of and an LSTM's core state.
#include "actor/acting.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/config.h"
#include "envs/env.h"

namespace pronghorn::actor {
namespace {

// An env of S splits over one stepped in this thread: finishing split 0
// steps the whole inner env (ActingLoop::run has begun every split's step by
// then), and each finish copies its own rows out. Wrong rows, offsets or
// order in the loop land in the wrong envs.
class SplitView final : public envs::BatchEnv {
 public:
  SplitView(std::unique_ptr<envs::BatchEnv> inner, int64_t splits)
      : BatchEnv(inner->spec(), inner->num_envs()),
        inner_(std::move(inner)),
        splits_(splits),
        actions_(spec().action_bytes() * num_envs()),
        obs_(spec().obs_bytes() * num_envs()),
        final_obs_(spec().obs_bytes() * num_envs()),
        rewards_(num_envs()),
        terminated_(num_envs()),
        truncated_(num_envs()) {}
  int64_t splits() const override { return splits_; }

 protected:
  void reset_unchecked(void* obs) override { inner_->reset(obs); }
  void step_unchecked(const void*, const envs::StepOutput&) override { FAIL() << "not split"; }
  void begin_step_unchecked(int64_t split, const void* actions) override {
    const size_t bytes = spec().action_bytes() * split_rows();
    std::memcpy(actions_.data() + split * bytes, actions, bytes);
    ++begun_;
  }
  void finish_step_unchecked(int64_t split, const envs::StepOutput& out) override {
    if (split == 0) {
      ASSERT_EQ(begun_, splits_) << "split 0 finished before every split began";
      begun_ = 0;
      inner_->step(actions_.data(), {obs_.data(), rewards_.data(), terminated_.data(),
                                     truncated_.data(), final_obs_.data()});
    }
    const int64_t first = split * split_rows(), n = split_rows();
    const size_t row = spec().obs_bytes();
    std::memcpy(out.obs, obs_.data() + first * row, n * row);
    std::copy_n(rewards_.data() + first, n, out.rewards);
    std::copy_n(terminated_.data() + first, n, out.terminated);
    std::copy_n(truncated_.data() + first, n, out.truncated);
    for (int64_t i = 0; i < n; ++i) {
      if (terminated_[first + i] || truncated_[first + i]) {
        std::memcpy(static_cast<uint8_t*>(out.final_obs) + i * row,
                    final_obs_.data() + (first + i) * row, row);
      }
    }
  }

 private:
  std::unique_ptr<envs::BatchEnv> inner_;
  int64_t splits_, begun_ = 0;
  std::vector<uint8_t> actions_, obs_, final_obs_;
  std::vector<float> rewards_;
  std::vector<uint8_t> terminated_, truncated_;
};

// What T steps of a run wrote.
struct Rollout {
  std::vector<float> obs, actions, log_probs, rewards, final_values, core_state;
  std::vector<uint8_t> terminated, truncated;
  std::vector<std::tuple<int64_t, double, int32_t>> episodes;
};

constexpr int64_t kEnvs = 6, kSteps = 40;

// Pendulum cut at 7 steps (a V(final obs) every 7), acted greedily (the
// splits' samplers are streams of their own) by `model` in `splits`.
Rollout roll_out(const Config& config, int64_t splits) {
  torch::manual_seed(3);  // the same weights for every number of splits
  auto inner = envs::make_builtin_env("pendulum", kEnvs, 11, 7);
  const EnvSpec spec = inner->spec();
  std::unique_ptr<envs::BatchEnv> env = std::move(inner);
  if (splits > 1) env = std::make_unique<SplitView>(std::move(env), splits);
  ActingLoop loop(std::move(env), PolicyNet(model_spec_for(spec, config.model)),
                  config.model.fast_path, 5);
  const int64_t K = kEnvs, D = spec.action_size, O = spec.obs_elements();
  Rollout r;
  r.obs.resize((kSteps + 1) * K * O);
  r.actions.resize(kSteps * K * D);
  r.log_probs.resize(kSteps * K);
  r.rewards.resize(kSteps * K);
  r.final_values.resize(kSteps * K);
  r.terminated.resize(kSteps * K);
  r.truncated.resize(kSteps * K);
  loop.reset(r.obs.data());
  const ActingLoop::StepAt at = [&](int64_t t) {
    return ActingLoop::Step{
        .obs = r.obs.data() + t * K * O,
        .actions = {.continuous = r.actions.data() + t * K * D,
                    .log_probs = r.log_probs.data() + t * K},
        .into = {.env = {r.obs.data() + (t + 1) * K * O, r.rewards.data() + t * K,
                         r.terminated.data() + t * K, r.truncated.data() + t * K, nullptr},
                 .final_values = r.final_values.data() + t * K}};
  };
  const auto heard = [&](int64_t row, double episode_return, int32_t length) {
    r.episodes.emplace_back(row, episode_return, length);
  };
  const ActingLoop::Run run = loop.run(kSteps, /*greedy=*/true, at, heard, [] { return true; });
  EXPECT_EQ(run.steps, kSteps);
  const int64_t width =
      config.model.core == ModelConfig::Core::kLstm ? config.model.core_hidden : 0;
  r.core_state.resize(2 * K * width);
  loop.write_core_state(r.core_state.data());
  return r;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::abs(want[i]))) << what << " [" << i << "]";
  }
}

void expect_same_rollout(const Config& config) {
  const Rollout one = roll_out(config, 1);
  ASSERT_FALSE(one.episodes.empty());
  ASSERT_TRUE(std::any_of(one.final_values.begin(), one.final_values.end(),
                          [](float v) { return v != 0.0f; }));
  for (int64_t splits : {2, 3}) {
    SCOPED_TRACE(::testing::Message() << splits << " splits");
    const Rollout split = roll_out(config, splits);
    expect_near(split.obs, one.obs, "obs");
    expect_near(split.actions, one.actions, "actions");
    expect_near(split.log_probs, one.log_probs, "log_probs");
    expect_near(split.rewards, one.rewards, "rewards");
    expect_near(split.final_values, one.final_values, "final_values");
    expect_near(split.core_state, one.core_state, "core_state");
    EXPECT_EQ(split.terminated, one.terminated);
    EXPECT_EQ(split.truncated, one.truncated);
    ASSERT_EQ(split.episodes.size(), one.episodes.size());
    for (size_t i = 0; i < one.episodes.size(); ++i) {
      EXPECT_EQ(std::get<0>(split.episodes[i]), std::get<0>(one.episodes[i]));
      EXPECT_NEAR(std::get<1>(split.episodes[i]), std::get<1>(one.episodes[i]), 1e-4);
      EXPECT_EQ(std::get<2>(split.episodes[i]), std::get<2>(one.episodes[i]));
    }
  }
}

TEST(ActingLoopTest, SplitsActAsOneSplitOnTheFusedPath) {
  expect_same_rollout(load_config("", {"env.name=pendulum", "model.hidden=[16,16]"}));
}

TEST(ActingLoopTest, SplitsActAsOneSplitWithAnLstmCore) {
  const Config config = load_config(
      "", {"env.name=pendulum", "model.hidden=[16]", "model.core=lstm", "model.core_hidden=8"});
  ASSERT_EQ(config.model.core, ModelConfig::Core::kLstm);
  expect_same_rollout(config);
}

}  // namespace
}  // namespace pronghorn::actor
