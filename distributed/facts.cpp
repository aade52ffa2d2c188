#include "distributed/facts.h"

#include <fmt/format.h>

#include <sstream>

namespace pronghorn::distributed {

std::string serialize(const Facts& facts) {
  std::string out;
  for (const auto& [name, value] : facts) {
    std::string v = value;
    for (char& ch : v) {
      if (ch == '\n' || ch == '\t') ch = ' ';
    }
    out += name;
    out += '\t';
    out += v;
    out += '\n';
  }
  return out;
}

Facts deserialize(const std::string& text) {
  Facts facts;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    facts.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return facts;
}

std::string first_difference(const Facts& ours, const Facts& theirs, int r) {
  for (const auto& [name, value] : ours) {
    std::string other = "(missing)";
    for (const auto& [n, v] : theirs) {
      if (n == name) other = v;
    }
    if (other != value) {
      return fmt::format("rank {}: {} differs (rank 0: {}; rank {}: {})", r, name, value, r, other);
    }
  }
  for (const auto& [name, value] : theirs) {
    bool known = false;
    for (const auto& fact : ours) known = known || fact.first == name;
    if (!known)
      return fmt::format("rank {}: {} differs (rank 0: (missing); rank {}: {})", r, name, r, value);
  }
  return "";
}

}  // namespace pronghorn::distributed
