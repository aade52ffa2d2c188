// "Did you mean ...?" for names a user typed: config keys, subcommands, envs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pronghorn {

// The candidate `given` abbreviates by its words' initials ("learner.lr" →
// "learner.learning_rate"), else the closest by edit distance, else one that
// is a prefix of it (or it of them); "" when none is close enough to be a
// plausible typo.
std::string closest_match(std::string_view given, const std::vector<std::string>& candidates);

// " (did you mean X?)" for closest_match, or "" when there is none.
std::string did_you_mean(std::string_view given, const std::vector<std::string>& candidates);

}  // namespace pronghorn
