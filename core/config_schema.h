// Every configuration key, in one table: where its value lives, its type, its
// range or choices, and one line of help. Parsing, validation, printing and
// `pronghorn config --keys` all walk this table, so a key is declared once.
// Internal to core/config*.cpp, but for may_differ_per_rank (tools/cluster.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/config.h"
#include "core/option_table.h"

namespace pronghorn::config_schema {

// One of a fixed set of words, held as an enum (LearnerConfig::Optimizer, ...):
// the enum's value is the index of its word in the Field's `choices`. Made by
// choice(), which keeps the enum's type in the two functions.
struct ChoiceRef {
  void* target;
  int (*get)(const void* target);
  void (*set)(void* target, int index);
};

template <typename E>
ChoiceRef choice(E* target) {
  return {target, [](const void* t) { return static_cast<int>(*static_cast<const E*>(t)); },
          [](void* t, int index) { *static_cast<E*>(t) = static_cast<E>(index); }};
}

// The words of an enum's choices, in enum order, for a Field's `choices`.
template <typename E>
std::vector<std::string_view> choices(E value) {
  const auto names = names_of(value);
  return {names.begin(), names.end()};
}

// Where a key's value lives; its type is the key's kind (core/config_kinds.h
// reads, writes and checks each). std::optional<int64_t> and
// std::optional<double>: a number, or the word "auto" (empty), which the code
// that reads the value resolves (actor.count: one per spare core;
// run.target_return: the env's own). OptionTable: a free-form table.
using Target =
    std::variant<int64_t*, double*, std::string*, std::vector<int64_t>*, std::vector<std::string>*,
                 bool*, std::optional<int64_t>*, std::optional<double>*, ChoiceRef, OptionTable*>;

// Whether the ranks of one job (several learners) may set a key differently:
// where a rank stands or what its node has (kMayDiffer), or what every rank
// must agree on at the rendezvous (kSame; tools/cluster.cpp's job facts).
enum class Ranks { kSame, kMayDiffer };

struct Field {
  std::string_view section;
  std::string_view key;
  Target target;  // points into the Config the table was built for
  double min = -std::numeric_limits<double>::infinity();  // numbers (and list items)
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string_view> choices;  // a ChoiceRef's words, in enum order
  Ranks ranks = Ranks::kSame;
  std::string_view help;

  std::string name() const { return std::string(section) + "." + std::string(key); }
};

// The table, with targets pointing into `config`. Sections in file order.
std::vector<Field> fields(Config& config);

// Whether the ranks of one job may set key `name` ("section.key")
// differently (its row's Ranks); false for a name not in the table.
bool may_differ_per_rank(std::string_view name);

// Throws UsageError("config: " + message).
[[noreturn]] void fail(const std::string& message);

// `s` as a TOML basic string, quotes and escapes included.
std::string quoted(std::string_view s);

// The checks that span keys (config_checks.cpp); fail() on the first broken.
void check_combinations(const Config& config);

}  // namespace pronghorn::config_schema
