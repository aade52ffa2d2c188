// The bodies of the checkpoint sections that hold running statistics
// (learner/checkpoint_statistics.h): float64 values, little-endian.
#include "learner/checkpoint_statistics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace pronghorn::learner {
namespace {

std::string f64_body(std::initializer_list<const std::vector<double>*> parts) {
  std::string body;
  for (const std::vector<double>* part : parts) {
    body.append(reinterpret_cast<const char*>(part->data()), part->size() * sizeof(double));
  }
  return body;
}

}  // namespace

std::string return_stats_body(const ReturnStats& stats) {
  const std::vector<double> values = {stats.count, stats.mean, stats.var};
  return f64_body({&values});
}

std::string observation_stats_body(const ObservationStats& stats) {
  const std::vector<double> count = {stats.count};
  return f64_body({&count, &stats.mean, &stats.var});
}

bool read_return_stats(std::string_view body, std::optional<ReturnStats>& into, std::string* why) {
  ReturnStats stats;
  if (body.size() != 3 * sizeof(double)) {
    *why = fmt::format("section \"return_scaling\" holds {} bytes, expected 24", body.size());
    return false;
  }
  std::memcpy(&stats.count, body.data(), 8);
  std::memcpy(&stats.mean, body.data() + 8, 8);
  std::memcpy(&stats.var, body.data() + 16, 8);
  if (!(stats.count > 0 && stats.var >= 0 && std::isfinite(stats.count) &&
        std::isfinite(stats.mean) && std::isfinite(stats.var))) {
    *why = fmt::format("section \"return_scaling\": count {}, mean {}, var {} are not statistics",
                       stats.count, stats.mean, stats.var);
    return false;
  }
  into = stats;
  return true;
}

bool read_observation_stats(std::string_view body, std::optional<ObservationStats>& into,
                            std::string* why) {
  const size_t doubles = body.size() / sizeof(double);
  if (body.size() % sizeof(double) != 0 || doubles < 3 || doubles % 2 != 1) {
    *why = fmt::format(
        "section \"observation_statistics\" holds {} bytes, expected 8 × (1 + 2d) for d "
        "observation values",
        body.size());
    return false;
  }
  std::vector<double> values(doubles);
  std::memcpy(values.data(), body.data(), body.size());
  const auto d = static_cast<int64_t>((doubles - 1) / 2);
  ObservationStats stats(d);
  stats.count = values[0];
  std::copy(values.begin() + 1, values.begin() + 1 + d, stats.mean.begin());
  std::copy(values.begin() + 1 + d, values.end(), stats.var.begin());
  const bool finite =
      std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
  const bool variances =
      std::all_of(stats.var.begin(), stats.var.end(), [](double v) { return v >= 0; });
  if (!(finite && stats.count > 0 && variances)) {
    *why = fmt::format(
        "section \"observation_statistics\": count {} with {} means and variances that are not "
        "statistics (each finite, count above 0, variances at least 0)",
        stats.count, d);
    return false;
  }
  into = std::move(stats);
  return true;
}

}  // namespace pronghorn::learner
