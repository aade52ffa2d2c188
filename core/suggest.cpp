#include "core/suggest.h"

#include <algorithm>
#include <string>

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

// The first letters of `name`'s words ("learning_rate" → "lr"): after the
// last '.', words split at '_'.
std::string initials(std::string_view name) {
  std::string out;
  const size_t dot = name.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? name : name.substr(dot + 1);
  for (size_t i = 0; i < last.size(); ++i) {
    if (last[i] != '_' && (i == 0 || last[i - 1] == '_')) out += last[i];
  }
  return out;
}

// `given` names `candidate` by its words' initials ("learner.lr" for
// "learner.learning_rate"): the same part up to the last '.', and two or more
// initials, so that a one-word key is not everyone's abbreviation.
bool abbreviates(std::string_view given, std::string_view candidate) {
  const size_t dot = given.rfind('.') + 1;  // 0 when there is none
  if (candidate.substr(0, dot) != given.substr(0, dot)) return false;
  const std::string_view letters = given.substr(dot);
  return letters.size() >= 2 && letters == initials(candidate.substr(dot));
}

}  // namespace

std::string closest_match(std::string_view given, const std::vector<std::string>& candidates) {
  for (const auto& candidate : candidates) {  // "learner.lr" → "learner.learning_rate"
    if (abbreviates(given, candidate)) return candidate;
  }
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
