// model.normalize_observations: float observations shifted and scaled by a
// running mean and variance, then clipped, before the network — the math of
// Stable-Baselines3's VecNormalize(norm_obs) and Gymnasium's
// NormalizeObservation, which the published MuJoCo PPO returns use:
//
//   x' = clip((x − mean) / sqrt(var + ε), −clip, clip),  ε = 1e-8
//
// The statistics start at mean 0, variance 1 and a count of 1e-4 (theirs),
// and take each batch's observations in by Chan et al.'s parallel update.
// The learner holds them in float64 (learner/trainer.h), saves them in
// checkpoints and publishes a float32 copy with the weights; the policy
// applies that copy (PolicyNetImpl::observation_statistics()).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace pronghorn {

inline constexpr float kObservationEpsilon = 1e-8f;
inline constexpr double kObservationPriorCount = 1e-4;

// One set of observations' count, means and sums of squared deviations
// from them (float64): what several learners exchange, so that every rank
// takes in every rank's batch (learner/data_parallel.h).
struct ObservationMoments {
  double count = 0;
  std::vector<double> mean, m2;

  // Of `n` rows of `d` floats, in two passes (no large sums of squares cancel).
  static ObservationMoments of(const float* rows, int64_t n, int64_t d);
};

// Running statistics of observations of `size` floats, float64.
struct ObservationStats {
  double count = kObservationPriorCount;
  std::vector<double> mean, var;

  ObservationStats() = default;
  explicit ObservationStats(int64_t size)
      : mean(static_cast<size_t>(size), 0.0), var(static_cast<size_t>(size), 1.0) {}
  int64_t size() const { return static_cast<int64_t>(mean.size()); }
  bool operator==(const ObservationStats&) const = default;

  // Takes in `n` observations, rows of size() floats: the merged mean and
  // (population) variance of everything seen, the prior counted as `count`
  // observations at mean 0, variance 1.
  void update(const float* rows, int64_t n) { merge(ObservationMoments::of(rows, n, size())); }
  // Takes in a set's moments (nothing when its count is 0).
  void merge(const ObservationMoments& set);
};

// The normalisation of `n` rows of `d` floats, `in` → `out` (may be the same),
// with float32 statistics mean [d], var [d]: the formula above, in float32.
void normalize_rows(const float* in, float* out, int64_t n, int64_t d, const float* mean,
                    const float* var, float clip);

// The same on a float32 tensor [..., obs...] (d floats per observation) on
// any device, mean and var [d] on its device. Equal, bit for bit, to
// normalize_rows() on the CPU.
at::Tensor normalize_observations(const at::Tensor& obs, const at::Tensor& mean,
                                  const at::Tensor& var, double clip);

}  // namespace pronghorn
