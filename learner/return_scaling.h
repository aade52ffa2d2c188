// loss.return_scaling: rewards divided by a running estimate of the standard
// deviation of the discounted return, as Stable-Baselines3's
// VecNormalize(norm_reward=True) and CleanRL's NormalizeReward do. Per env
// step t of a batch, for every env: G ← γ·G + r_t; the running mean and
// variance take the step's N values of G (Chan et al.'s parallel update, as
// their RunningMeanStd); r_t ← clip(r_t / √(var + 1e-8), ±10); then G ← 0
// where the episode ended. Each env is one column of one actor's unrolls:
// its G carries over to that actor's next unroll (keyed by the actor's id
// and the env's row), so it runs as it would inside the env. The statistics
// (not the per-env G) go into checkpoints; with several learners each rank
// keeps its own. Applied after loss.reward_scale. Approximate where an
// actor's unrolls do not arrive one after another: an unroll dropped for
// lag, or an actor-only node's actor whose id a local actor also has (their
// G then interleave); the statistics hardly notice.
// Threads: one (the learner's loop).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <vector>

namespace pronghorn::learner {

// The running statistics of the discounted return. The initial count is
// RunningMeanStd's (1e-4): the first values all but replace mean and var.
struct ReturnStats {
  double count = 1e-4, mean = 0.0, var = 1.0;
  bool operator==(const ReturnStats&) const = default;
};

class ReturnScaler {
 public:
  // `discount`: loss.discount; `envs`: K, the columns of one unroll.
  ReturnScaler(double discount, int64_t envs);

  // Scales `rewards` [T, N] (float32, CPU, N = unrolls × K; unroll u's
  // columns are u·K … u·K + K − 1, acted by actor actors[u]) in place.
  // `ended` [T, N]: nonzero where an episode ended at that step.
  void scale(at::Tensor& rewards, const at::Tensor& ended, const std::vector<uint32_t>& actors);

  const ReturnStats& stats() const { return stats_; }
  void restore(const ReturnStats& stats) { stats_ = stats; }

  static constexpr double kEpsilon = 1e-8, kClip = 10.0;

 private:
  const double discount_;
  const int64_t k_;
  ReturnStats stats_;
  std::map<uint32_t, std::vector<double>> returns_;  // each actor's [K] running G
};

}  // namespace pronghorn::learner
