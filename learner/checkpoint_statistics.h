// The checkpoint sections of running statistics (learner/checkpoint_format.h
// names them and says which are required): each body written from its
// statistics, and read back checked, with what is wrong said in `why`.
//   "return_scaling"          count mean var, f64 each; count above 0, var ≥ 0
//   "observation_statistics"  count, then mean[d] and var[d], f64 each;
//                             count above 0, every value finite, var ≥ 0
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "learner/return_scaling.h"
#include "model/observation_norm.h"

namespace pronghorn::learner {

std::string return_stats_body(const ReturnStats& stats);
std::string observation_stats_body(const ObservationStats& stats);

bool read_return_stats(std::string_view body, std::optional<ReturnStats>& into, std::string* why);
bool read_observation_stats(std::string_view body, std::optional<ObservationStats>& into,
                            std::string* why);

}  // namespace pronghorn::learner
