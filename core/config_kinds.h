// The kinds of value a config key holds (internal to core/config*.cpp), one
// struct each: what it is called in errors, how a TOML value (or a bare word
// after --set) is read into it, how it is written back as TOML, and how its
// range is checked. A row of the table (core/config_schema.h) names its kind
// by its target's type; with_kind() is the one dispatch from a row to its
// kind.
//
// Each Kind<T> (T: the target, a pointer into the Config, or a ChoiceRef):
//   kName                       "an integer", for "expected …"
//   read(target, node, ctx)     "" when `node` was taken; else what was expected
//   read_word(target, w, ctx)   --set's bare word (strings, choices, "auto"):
//                               whether it was taken as one
//   format(target, field)       the value as TOML
//   check(target, field, ctx)   "" when in range; else what was expected
#pragma once

#include <toml++/toml.h>

#include <map>
#include <string>
#include <string_view>
#include <variant>

#include "core/config_schema.h"

namespace pronghorn::config_schema {

// Words given for a choice key that name none of its choices, by key: kept
// until validation refuses them in table order, as it refuses any value out
// of range, unless a later source sets the key to a valid word.
using Unmatched = std::map<std::string, std::string>;

// What reading and checking a row see besides its target.
struct KindContext {
  const Field& field;
  Unmatched& unmatched;
};

// `node` as TOML text, strings in double quotes.
std::string node_text(const toml::node& node);
// A number as TOML writes it: 3.0, 1e-05, inf, nan.
std::string format_number(double v);

template <typename T>
struct Kind;

template <>
struct Kind<int64_t*> {
  static constexpr std::string_view kName = "an integer";
  static std::string read(int64_t* v, const toml::node& node, KindContext& ctx);
  static bool read_word(int64_t*, std::string_view, KindContext&) { return false; }
  static std::string format(const int64_t* v, const Field& field);
  static std::string check(const int64_t* v, KindContext& ctx);
};

template <>
struct Kind<double*> {
  static constexpr std::string_view kName = "a number";
  static std::string read(double* v, const toml::node& node, KindContext& ctx);
  static bool read_word(double*, std::string_view, KindContext&) { return false; }
  static std::string format(const double* v, const Field& field);
  static std::string check(const double* v, KindContext& ctx);
};

template <>
struct Kind<std::string*> {
  static constexpr std::string_view kName = "a string";
  static std::string read(std::string* v, const toml::node& node, KindContext& ctx);
  static bool read_word(std::string* v, std::string_view word, KindContext& ctx);
  static std::string format(const std::string* v, const Field& field);
  static std::string check(const std::string*, KindContext&) { return ""; }
};

template <>
struct Kind<std::vector<int64_t>*> {
  static constexpr std::string_view kName = "a list of integers";
  static std::string read(std::vector<int64_t>* v, const toml::node& node, KindContext& ctx);
  static bool read_word(std::vector<int64_t>*, std::string_view, KindContext&) { return false; }
  static std::string format(const std::vector<int64_t>* v, const Field& field);
  static std::string check(const std::vector<int64_t>* v, KindContext& ctx);
};

// A list of names; the row's max is how many it may hold.
template <>
struct Kind<std::vector<std::string>*> {
  static constexpr std::string_view kName = "a list of names";
  static std::string read(std::vector<std::string>* v, const toml::node& node, KindContext& ctx);
  static bool read_word(std::vector<std::string>*, std::string_view, KindContext&) { return false; }
  static std::string format(const std::vector<std::string>* v, const Field& field);
  static std::string check(const std::vector<std::string>* v, KindContext& ctx);
};

template <>
struct Kind<bool*> {
  static constexpr std::string_view kName = "true or false";
  static std::string read(bool* v, const toml::node& node, KindContext& ctx);
  static bool read_word(bool*, std::string_view, KindContext&) { return false; }
  static std::string format(const bool* v, const Field& field);
  static std::string check(const bool*, KindContext&) { return ""; }
};

// "auto" (empty; the code that reads the value resolves it) or an integer.
template <>
struct Kind<std::optional<int64_t>*> {
  static constexpr std::string_view kName = "\"auto\" or an integer";
  static std::string read(std::optional<int64_t>* v, const toml::node& node, KindContext& ctx);
  static bool read_word(std::optional<int64_t>* v, std::string_view word, KindContext& ctx);
  static std::string format(const std::optional<int64_t>* v, const Field& field);
  static std::string check(const std::optional<int64_t>* v, KindContext& ctx);
};

// "auto" or a number.
template <>
struct Kind<std::optional<double>*> {
  static constexpr std::string_view kName = "\"auto\" or a number";
  static std::string read(std::optional<double>* v, const toml::node& node, KindContext& ctx);
  static bool read_word(std::optional<double>* v, std::string_view word, KindContext& ctx);
  static std::string format(const std::optional<double>* v, const Field& field);
  static std::string check(const std::optional<double>* v, KindContext& ctx);
};

// One of the row's words, held as an enum.
template <>
struct Kind<ChoiceRef> {
  static constexpr std::string_view kName = "a string";
  static std::string read(ChoiceRef v, const toml::node& node, KindContext& ctx);
  static bool read_word(ChoiceRef v, std::string_view word, KindContext& ctx);
  static std::string format(ChoiceRef v, const Field& field);
  static std::string check(ChoiceRef v, KindContext& ctx);
};

// A free-form table (core/option_table.h): `[section.key]` in a file, an
// inline table `{ a = 1 }` after --set, or one entry `--set section.key.a=1`
// (read_entry).
template <>
struct Kind<OptionTable*> {
  static constexpr std::string_view kName = "a table of options (name = value)";
  static constexpr size_t kMaxEntries = 256;
  static std::string read(OptionTable* v, const toml::node& node, KindContext& ctx);
  static bool read_word(OptionTable*, std::string_view, KindContext&) { return false; }
  // Sets entry `name` to `node` (a string, number, boolean or an array of
  // those); "" or what was wrong.
  static std::string read_entry(OptionTable* v, std::string_view name, const toml::node& node);
  static std::string format(const OptionTable* v, const Field& field);
  static std::string check(const OptionTable*, KindContext&) { return ""; }
};

// Calls fn(Kind<T>{}, target) for the row's kind.
template <typename Fn>
decltype(auto) with_kind(const Field& field, Fn&& fn) {
  return std::visit(
      [&](auto target) -> decltype(auto) { return fn(Kind<decltype(target)>{}, target); },
      field.target);
}

}  // namespace pronghorn::config_schema
