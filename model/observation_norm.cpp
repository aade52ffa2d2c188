#include "model/observation_norm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pronghorn {

ObservationMoments ObservationMoments::of(const float* rows, int64_t n, int64_t d) {
  ObservationMoments set{.count = static_cast<double>(std::max<int64_t>(n, 0)),
                         .mean = std::vector<double>(static_cast<size_t>(d), 0.0),
                         .m2 = std::vector<double>(static_cast<size_t>(d), 0.0)};
  if (n <= 0) return set;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) set.mean[j] += rows[i * d + j];
  }
  for (double& m : set.mean) m /= set.count;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const double delta = rows[i * d + j] - set.mean[j];
      set.m2[j] += delta * delta;
    }
  }
  return set;
}

// Chan, Golub and LeVeque's merge of two sets' counts, means and sums of
// squared deviations.
void ObservationStats::merge(const ObservationMoments& set) {
  if (set.count <= 0) return;
  PRONGHORN_CHECK(set.mean.size() == mean.size() && set.m2.size() == mean.size(),
                  "observation moments of ", set.mean.size(), " values for statistics of ",
                  mean.size());
  const double total = count + set.count;
  for (size_t j = 0; j < mean.size(); ++j) {
    const double delta = set.mean[j] - mean[j];
    const double m2 = var[j] * count + set.m2[j] + delta * delta * count * set.count / total;
    mean[j] += delta * set.count / total;
    var[j] = m2 / total;
  }
  count = total;
}

void normalize_rows(const float* in, float* out, int64_t n, int64_t d, const float* mean,
                    const float* var, float clip) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const float x = (in[i * d + j] - mean[j]) / std::sqrt(var[j] + kObservationEpsilon);
      out[i * d + j] = std::clamp(x, -clip, clip);
    }
  }
}

at::Tensor normalize_observations(const at::Tensor& obs, const at::Tensor& mean,
                                  const at::Tensor& var, double clip) {
  const int64_t d = mean.size(0);
  PRONGHORN_CHECK(obs.scalar_type() == at::kFloat && d > 0 && obs.numel() % d == 0,
                  "observation normalisation: expected float32 observations of ", d,
                  " values each, got ", obs.sizes(), " ", obs.scalar_type());
  const auto c = static_cast<float>(clip);
  const at::Tensor rows = obs.reshape({-1, d});
  return ((rows - mean) / (var + kObservationEpsilon).sqrt()).clamp(-c, c).view(obs.sizes());
}

}  // namespace pronghorn
