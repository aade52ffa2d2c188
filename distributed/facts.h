// What every rank of a job must have equal, and how rank 0 compares them at
// start (Rendezvous::agree): (name, value) pairs, e.g. ("model.hidden",
// "[64, 64]"), sent through the store as one line each.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace pronghorn::distributed {

using Facts = std::vector<std::pair<std::string, std::string>>;

// "name\tvalue\n" per fact; tabs and newlines inside a value become spaces.
std::string serialize(const Facts& facts);
Facts deserialize(const std::string& text);

// "rank R: NAME differs (rank 0: A; rank R: B)" for the first fact in which
// `theirs` (rank r's) differs from `ours` (rank 0's); "" when none does.
std::string first_difference(const Facts& ours, const Facts& theirs, int r);

}  // namespace pronghorn::distributed
