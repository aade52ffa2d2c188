#include "model/observation_norm.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pronghorn {

// Chan, Golub and LeVeque's merge of two sets' counts, means and sums of
// squared deviations: the batch's moments are taken in two passes first, so
// no large sums of squares cancel.
void ObservationStats::update(const float* rows, int64_t n) {
  if (n <= 0) return;
  const int64_t d = size();
  std::vector<double> batch_mean(static_cast<size_t>(d), 0.0);
  std::vector<double> batch_m2(static_cast<size_t>(d), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) batch_mean[j] += rows[i * d + j];
  }
  for (double& m : batch_mean) m /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const double delta = rows[i * d + j] - batch_mean[j];
      batch_m2[j] += delta * delta;
    }
  }
  const double batch_count = static_cast<double>(n);
  const double total = count + batch_count;
  for (int64_t j = 0; j < d; ++j) {
    const double delta = batch_mean[j] - mean[j];
    const double m2 = var[j] * count + batch_m2[j] + delta * delta * count * batch_count / total;
    mean[j] += delta * batch_count / total;
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
