#include "learner/return_scaling.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <vector>

namespace pronghorn::learner {
namespace {

constexpr double kDiscount = 0.9;
constexpr int64_t kT = 5, kK = 3;

// One batch: unrolls of `actors`, rewards and episode ends drawn from `seed`.
struct Draw {
  at::Tensor rewards, ended;  // [T, unrolls·K]
  std::vector<uint32_t> actors;
};

Draw draw(std::vector<uint32_t> actors, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const int64_t n = kK * std::ssize(actors);
  return {at::randn({kT, n}, gen) * 3 + 1, at::rand({kT, n}, gen).lt(0.15), std::move(actors)};
}

// The reference, in float64 tensors: each env's G as a whole row per actor,
// the statistics as the mean and population variance of every G seen (with
// RunningMeanStd's prior of count 1e-4 at mean 0, var 1), the scaled reward
// r / √(var + 1e-8) clipped to ±10.
struct Reference {
  std::map<uint32_t, at::Tensor> g;  // [K] per actor
  std::vector<at::Tensor> seen;      // every step's [N] values of G

  at::Tensor scale(const Draw& d) {
    at::Tensor out = at::empty({kT, d.rewards.size(1)}, at::kDouble);
    std::vector<at::Tensor> rows;
    for (uint32_t a : d.actors) {
      if (!g.count(a)) g[a] = at::zeros({kK}, at::kDouble);
    }
    for (int64_t t = 0; t < kT; ++t) {
      std::vector<at::Tensor> now;
      for (uint32_t a : d.actors) now.push_back(g[a]);
      at::Tensor step = kDiscount * at::cat(now) + d.rewards[t].to(at::kDouble);
      seen.push_back(step);
      const at::Tensor all = at::cat(seen);
      const double n = static_cast<double>(all.numel()), prior = 1e-4;
      const double mean = all.sum().item<double>() / (n + prior);
      // The pooled variance of the prior (var 1 at mean 0) and the values.
      const double var =
          (prior * (1.0 + mean * mean) + ((all - mean) * (all - mean)).sum().item<double>()) /
          (n + prior);
      out[t] = (d.rewards[t].to(at::kDouble) / std::sqrt(var + 1e-8)).clamp(-10, 10);
      step = step.masked_fill(d.ended[t], 0.0);
      for (size_t u = 0; u < d.actors.size(); ++u) {
        g[d.actors[u]] = step.slice(0, u * kK, (u + 1) * kK).clone();
      }
    }
    return out;
  }
};

TEST(ReturnScalingTest, MatchesAFloat64ReferenceAcrossActorsAndBatches) {
  ReturnScaler scaler(kDiscount, kK);
  Reference reference;
  // Actor 1's G carries from its first unroll to its third, past actor 0's.
  const std::vector<Draw> batches = {draw({0, 1}, 1), draw({1}, 2), draw({0, 2, 1}, 3),
                                     draw({2, 0}, 4)};
  for (const Draw& d : batches) {
    at::Tensor ours = d.rewards.clone();
    scaler.scale(ours, d.ended, d.actors);
    const at::Tensor want = reference.scale(d);
    EXPECT_LT((ours.to(at::kDouble) - want).abs().max().item<double>(), 1e-5);
  }
  const at::Tensor all = at::cat(reference.seen);
  EXPECT_NEAR(scaler.stats().count, all.numel() + 1e-4, 1e-9);
  EXPECT_NEAR(scaler.stats().mean, all.mean().item<double>(), 1e-4);
  EXPECT_NEAR(scaler.stats().var, all.var(/*unbiased=*/false).item<double>(), 1e-3);
}

TEST(ReturnScalingTest, LargeRewardsAreClippedAndRestoredStatisticsAreUsed) {
  ReturnScaler scaler(kDiscount, kK);
  scaler.restore({.count = 1e6, .mean = 0.0, .var = 1e-4});  // std 0.01
  at::Tensor rewards = at::full({1, kK}, 1.0f);
  scaler.scale(rewards, at::zeros({1, kK}, at::kBool), {0});
  EXPECT_TRUE(at::equal(rewards, at::full({1, kK}, 10.0f))) << "1 / 0.01 = 100, clipped to 10";
  // The restored statistics, moved a little by those three returns of 1.
  EXPECT_NEAR(scaler.stats().var, 1e-4 + 3e-6, 1e-7);
  const double std_now = std::sqrt(scaler.stats().var + ReturnScaler::kEpsilon);
  at::Tensor small = at::full({1, kK}, 0.001f);
  scaler.scale(small, at::zeros({1, kK}, at::kBool), {1});  // another actor: its G starts at 0
  EXPECT_NEAR(small[0][0].item<float>(), 0.001 / std_now, 1e-5) << "about 0.1, not 0.001";
}

}  // namespace
}  // namespace pronghorn::learner
