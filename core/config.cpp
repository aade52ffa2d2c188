// Reading, validating and printing the Config. The keys themselves are in
// config_schema.cpp.
#include "core/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "core/config_schema.h"
#include "core/error.h"
#include "core/suggest.h"
#include "core/toml_limits.h"

namespace pronghorn {

namespace config_schema {

[[noreturn]] void fail(const std::string& message) { throw UsageError("config: " + message); }

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20)
          out += fmt::format("\\u{:04x}", ch);
        else
          out += ch;
    }
  }
  return out + "\"";
}

}  // namespace config_schema

namespace {

using config_schema::check_combinations;
using config_schema::ChoiceRef;
using config_schema::fail;
using config_schema::Field;
using config_schema::quoted;

// Words given for a choice key that name none of its choices, by key: kept
// until validation refuses them in table order, as it refuses any value out
// of range, unless a later source sets the key to a valid word.
using Unmatched = std::map<std::string, std::string>;

// The word an "auto or an integer" key takes for "auto" (its empty value).
constexpr std::string_view kAuto = "auto";

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_value(const Field& field) {
  struct Visitor {
    const Field& field;
    std::string operator()(int64_t* v) const { return std::to_string(*v); }
    std::string operator()(double* v) const { return format_number(*v); }
    std::string operator()(std::string* v) const { return quoted(*v); }
    std::string operator()(std::vector<int64_t>* v) const {
      return "[" + fmt::format("{}", fmt::join(*v, ", ")) + "]";
    }
    std::string operator()(bool* v) const { return *v ? "true" : "false"; }
    std::string operator()(std::optional<int64_t>* v) const {
      return v->has_value() ? std::to_string(**v) : quoted(kAuto);
    }
    std::string operator()(std::optional<double>* v) const {
      return v->has_value() ? format_number(**v) : quoted(kAuto);
    }
    std::string operator()(ChoiceRef v) const {
      const int index = v.get(v.target);
      return index >= 0 && index < static_cast<int>(field.choices.size())
                 ? quoted(field.choices[static_cast<size_t>(index)])
                 : std::to_string(index);
    }
  };
  return std::visit(Visitor{field}, field.target);
}

std::string node_text(const toml::node& node) {
  if (node.is_string()) return quoted(node.as_string()->get());  // toml++ would use '...'
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  return out.str();
}

// Stores the index of `word` in the field's choices, or keeps the word in
// `unmatched` for check_ranges to refuse.
void set_choice(const Field& field, const std::string& word, Unmatched& unmatched) {
  const auto found = std::find(field.choices.begin(), field.choices.end(), word);
  if (found == field.choices.end()) {
    unmatched[field.name()] = word;
    return;
  }
  unmatched.erase(field.name());
  const ChoiceRef& ref = std::get<ChoiceRef>(field.target);
  ref.set(ref.target, static_cast<int>(found - field.choices.begin()));
}

// Stores `node` into the field's value, or fails naming the field and the value.
void assign(const Field& field, const toml::node& node, const std::string& origin,
            Unmatched& unmatched) {
  auto wrong_type = [&] {
    fail(fmt::format("{}: {} = {}: expected {}", origin, field.name(), node_text(node),
                     config_schema::type_name(field.target)));
  };
  struct Visitor {
    const toml::node& node;
    const decltype(wrong_type)& wrong;
    const Field& field;
    Unmatched& unmatched;
    void operator()(int64_t* v) const {
      if (!node.is_integer()) wrong();
      *v = node.as_integer()->get();
    }
    void operator()(double* v) const {
      if (node.is_integer())
        *v = static_cast<double>(node.as_integer()->get());
      else if (node.is_floating_point())
        *v = node.as_floating_point()->get();
      else
        wrong();
    }
    void operator()(std::string* v) const {
      if (!node.is_string()) wrong();
      *v = node.as_string()->get();
    }
    void operator()(std::vector<int64_t>* v) const {
      const toml::array* array = node.as_array();
      if (array == nullptr) wrong();
      std::vector<int64_t> items;
      for (const toml::node& item : *array) {
        if (!item.is_integer()) wrong();
        items.push_back(item.as_integer()->get());
      }
      *v = std::move(items);
    }
    void operator()(bool* v) const {
      if (!node.is_boolean()) wrong();
      *v = node.as_boolean()->get();
    }
    void operator()(std::optional<int64_t>* v) const {
      if (node.is_integer())
        *v = node.as_integer()->get();
      else if (node.is_string() && node.as_string()->get() == kAuto)
        *v = std::nullopt;
      else
        wrong();
    }
    void operator()(std::optional<double>* v) const {
      if (node.is_integer())
        *v = static_cast<double>(node.as_integer()->get());
      else if (node.is_floating_point())
        *v = node.as_floating_point()->get();
      else if (node.is_string() && node.as_string()->get() == kAuto)
        *v = std::nullopt;
      else
        wrong();
    }
    void operator()(ChoiceRef) const {
      if (!node.is_string()) wrong();
      set_choice(field, node.as_string()->get(), unmatched);
    }
  };
  std::visit(Visitor{node, wrong_type, field, unmatched}, field.target);
}

std::vector<std::string> section_names(const std::vector<Field>& table) {
  std::vector<std::string> names;
  for (const Field& f : table)
    if (names.empty() || names.back() != f.section) names.emplace_back(f.section);
  return names;
}

const Field& find_field(const std::vector<Field>& table, std::string_view section,
                        std::string_view key, const std::string& origin) {
  std::vector<std::string> sections = section_names(table);
  if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
    fail(fmt::format("{}: unknown section [{}]{}; sections are {}", origin, section,
                     did_you_mean(section, sections), fmt::join(sections, ", ")));
  }
  std::vector<std::string> keys;
  for (const Field& f : table) {
    if (f.section == section && f.key == key) return f;
    if (f.section == section) keys.push_back(f.name());
  }
  std::string full = fmt::format("{}.{}", section, key);
  fail(fmt::format("{}: unknown key {}{}", origin, full, did_you_mean(full, keys)));
}

void apply_table(std::vector<Field>& table, const toml::table& root, const std::string& origin,
                 Unmatched& unmatched) {
  for (const auto& [section, node] : root) {
    const toml::table* keys = node.as_table();
    if (keys == nullptr) {
      fail(fmt::format("{}: {} = {}: expected a [section] holding keys, not a top-level value",
                       origin, section.str(), node_text(node)));
    }
    for (const auto& [key, value] : *keys) {
      assign(find_field(table, section.str(), key.str(), origin), value, origin, unmatched);
    }
  }
}

// Fails unless `text` keeps within the bounds of core/toml_limits.h.
void check_limits(std::string_view text, size_t max_bytes, const std::string& origin) {
  if (text.size() > max_bytes) {
    fail(fmt::format("{}: {} bytes; at most {} are read", origin, text.size(), max_bytes));
  }
  const std::string problem = check_toml_limits(text);
  if (!problem.empty()) fail(fmt::format("{}: {}", origin, problem));
}

void apply_override(std::vector<Field>& table, const std::string& text, Unmatched& unmatched) {
  // A long override is named by its start: the message stays one short line.
  const std::string origin =
      fmt::format("--set {}", text.size() <= 80 ? text : text.substr(0, 60) + "…");
  size_t eq = text.find('=');
  size_t dot = text.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) {
    fail(fmt::format("{}: expected section.key=value", origin));
  }
  std::string section = text.substr(0, dot);
  std::string key = text.substr(dot + 1, eq - dot - 1);
  std::string value = text.substr(eq + 1);
  const Field& field = find_field(table, section, key, origin);

  // Strings and choices may be written bare (--set env.name=cartpole); the rest is TOML.
  bool bare_string = (std::holds_alternative<std::string*>(field.target) ||
                      std::holds_alternative<ChoiceRef>(field.target)) &&
                     (value.empty() || (value.front() != '"' && value.front() != '\''));
  if (bare_string) {
    if (auto* v = std::get_if<std::string*>(&field.target))
      **v = value;
    else
      set_choice(field, value, unmatched);
    return;
  }
  if (auto* v = std::get_if<std::optional<int64_t>*>(&field.target); v && value == kAuto) {
    **v = std::nullopt;  // --set actor.count=auto, unquoted
    return;
  }
  if (auto* v = std::get_if<std::optional<double>*>(&field.target); v && value == kAuto) {
    **v = std::nullopt;  // --set run.target_return=auto
    return;
  }
  check_limits("v = " + value, kMaxOverrideBytes, origin);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    fail(fmt::format("{}: {} = {}: expected {} written as in TOML", origin, field.name(), value,
                     config_schema::type_name(field.target)));
  }
  assign(field, *parsed.get("v"), origin, unmatched);
}

void check_ranges(Config& config, const Unmatched& unmatched) {
  for (const Field& f : config_schema::fields(config)) {
    auto out_of_range = [&](double v) { return !(v >= f.min && v <= f.max); };
    bool integral = !std::holds_alternative<double*>(f.target) &&
                    !std::holds_alternative<std::optional<double>*>(f.target);
    std::string range =
        integral
            ? fmt::format("in [{}, {}]", static_cast<int64_t>(f.min), static_cast<int64_t>(f.max))
            : fmt::format("in [{}, {}]", format_number(f.min), format_number(f.max));
    if (auto* v = std::get_if<int64_t*>(&f.target); v && out_of_range(static_cast<double>(**v))) {
      fail(fmt::format("{} = {}: expected an integer {}", f.name(), **v, range));
    }
    if (auto* v = std::get_if<std::optional<int64_t>*>(&f.target);
        v && **v && out_of_range(static_cast<double>(***v))) {
      fail(fmt::format("{} = {}: expected {} or an integer {}", f.name(), ***v, quoted(kAuto),
                       range));
    }
    if (auto* v = std::get_if<std::optional<double>*>(&f.target); v && **v && out_of_range(***v)) {
      fail(fmt::format("{} = {}: expected {} or a number {}", f.name(), format_number(***v),
                       quoted(kAuto), range));
    }
    if (auto* v = std::get_if<double*>(&f.target); v && out_of_range(**v)) {
      fail(fmt::format("{} = {}: expected a number {}", f.name(), format_number(**v), range));
    }
    if (auto* v = std::get_if<std::vector<int64_t>*>(&f.target)) {
      for (int64_t item : **v) {
        if (out_of_range(static_cast<double>(item))) {
          fail(fmt::format("{} = {}: expected every item {}", f.name(), format_value(f), range));
        }
      }
    }
    if (auto* v = std::get_if<ChoiceRef>(&f.target)) {
      const auto given = unmatched.find(f.name());
      const int index = v->get(v->target);
      if (given != unmatched.end() || index < 0 || index >= static_cast<int>(f.choices.size())) {
        const std::string word = given != unmatched.end() ? given->second : std::to_string(index);
        std::vector<std::string> choices(f.choices.begin(), f.choices.end());
        fail(fmt::format("{} = {}: expected one of {}{}", f.name(), quoted(word),
                         fmt::join(choices, ", "), did_you_mean(word, choices)));
      }
    }
  }
}

Config resolve(const toml::table* root, const std::string& origin,
               const std::vector<std::string>& overrides) {
  Config config;
  std::vector<Field> table = config_schema::fields(config);
  Unmatched unmatched;
  if (root != nullptr) apply_table(table, *root, origin, unmatched);
  for (const std::string& text : overrides) apply_override(table, text, unmatched);
  check_ranges(config, unmatched);
  check_combinations(config);  // validate(), with the words no choice matched
  return config;
}

// toml++ is used header-only with exceptions: parse errors arrive as toml::parse_error.
[[noreturn]] void fail_parse(const std::string& origin, const toml::parse_error& e) {
  const toml::source_position& at = e.source().begin;
  if (at.line == 0) fail(fmt::format("{}: {}", origin, e.description()));
  fail(fmt::format("{}:{}:{}: {}", origin, at.line, at.column, e.description()));
}

// The file's text, at most kMaxConfigFileBytes of it (whatever `path` is:
// /dev/zero, a directory, a pipe from `-c <(…)`).
std::string read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("{}: cannot open it ({})", path, std::strerror(errno)));
  std::string text(kMaxConfigFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad() || (!in.eof() && text.size() <= kMaxConfigFileBytes)) {
    fail(fmt::format("{}: cannot read it ({})", path, errno ? std::strerror(errno) : "I/O error"));
  }
  if (text.size() > kMaxConfigFileBytes) {
    fail(fmt::format("{}: more than {} bytes; a config file is at most that", path,
                     kMaxConfigFileBytes));
  }
  return text;
}

}  // namespace

Config parse_config(const std::string& toml_text, const std::string& origin,
                    const std::vector<std::string>& overrides) {
  check_limits(toml_text, kMaxConfigFileBytes, origin);
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    fail_parse(origin, e);
  }
  return resolve(&root, origin, overrides);
}

Config load_config(const std::string& toml_path, const std::vector<std::string>& overrides) {
  if (toml_path.empty()) return resolve(nullptr, "", overrides);
  return parse_config(read_config_file(toml_path), toml_path, overrides);
}

void validate(const Config& config) {
  Config copy = config;  // the schema table takes mutable pointers
  check_ranges(copy, {});
  check_combinations(config);
}

std::string to_toml(const Config& config) {
  Config copy = config;
  std::string out;
  std::string_view section;
  for (const Field& f : config_schema::fields(copy)) {
    if (f.section != section) {
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", f.section);
      section = f.section;
    }
    out += fmt::format("{:<22} # {}\n", fmt::format("{} = {}", f.key, format_value(f)), f.help);
  }
  return out;
}

}  // namespace pronghorn
