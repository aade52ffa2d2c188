#include "learner/return_scaling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pronghorn::learner {

ReturnScaler::ReturnScaler(double discount, int64_t envs) : discount_(discount), k_(envs) {}

void ReturnScaler::scale(at::Tensor& rewards, const at::Tensor& ended,
                         const std::vector<uint32_t>& actors) {
  PRONGHORN_CHECK(rewards.dim() == 2 && rewards.scalar_type() == at::kFloat &&
                      rewards.is_contiguous() && rewards.size(1) == k_ * std::ssize(actors),
                  "return scaling: rewards must be [T, unrolls × K] float32");
  const at::Tensor done = ended.to(at::kByte).contiguous();
  const int64_t T = rewards.size(0), N = rewards.size(1);
  float* r = rewards.data_ptr<float>();
  const uint8_t* d = done.data_ptr<uint8_t>();
  std::vector<double*> g(N);  // each column's running G
  for (size_t u = 0; u < actors.size(); ++u) {
    std::vector<double>& mine = returns_[actors[u]];
    mine.resize(k_, 0.0);
    for (int64_t k = 0; k < k_; ++k) g[u * k_ + k] = &mine[k];
  }
  for (int64_t t = 0; t < T; ++t) {
    // This step's N values of G, then one parallel update of mean and var.
    double sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      *g[n] = discount_ * *g[n] + r[t * N + n];
      sum += *g[n];
    }
    const double batch_mean = sum / static_cast<double>(N);
    double squares = 0;
    for (int64_t n = 0; n < N; ++n) squares += (*g[n] - batch_mean) * (*g[n] - batch_mean);
    const double batch_var = squares / static_cast<double>(N), batch_count = N;
    const double delta = batch_mean - stats_.mean, total = stats_.count + batch_count;
    const double m2 = stats_.var * stats_.count + batch_var * batch_count +
                      delta * delta * stats_.count * batch_count / total;
    stats_.mean += delta * batch_count / total;
    stats_.var = m2 / total;
    stats_.count = total;
    const double scale = 1.0 / std::sqrt(stats_.var + kEpsilon);
    for (int64_t n = 0; n < N; ++n) {
      float& reward = r[t * N + n];
      reward = static_cast<float>(std::clamp(reward * scale, -kClip, kClip));
      if (d[t * N + n] != 0) *g[n] = 0.0;
    }
  }
}

}  // namespace pronghorn::learner
