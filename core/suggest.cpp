#include "core/suggest.h"

#include <algorithm>

namespace pronghorn {
namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_match(std::string_view given, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, given.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    size_t d = edit_distance(given, candidate);
    if (d < best_distance) best = candidate, best_distance = d;
  }
  if (!best.empty() || given.empty()) return best;
  for (const auto& candidate : candidates) {  // "enviroment" → "env"
    if (given.starts_with(candidate) || std::string_view(candidate).starts_with(given)) {
      return candidate;
    }
  }
  return "";
}

std::string did_you_mean(std::string_view given, const std::vector<std::string>& candidates) {
  std::string best = closest_match(given, candidates);
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

}  // namespace pronghorn
