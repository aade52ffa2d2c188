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

#include "core/config_kinds.h"
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
using config_schema::fail;
using config_schema::Field;
using config_schema::quoted;

using config_schema::format_number;
using config_schema::KindContext;
using config_schema::node_text;
using config_schema::Unmatched;
using config_schema::with_kind;

std::string format_value(const Field& field) {
  return with_kind(field, [&](auto kind, auto target) { return kind.format(target, field); });
}

std::string type_name(const Field& field) {
  return with_kind(field, [](auto kind, auto) { return std::string(kind.kName); });
}

// Stores `node` into the field's value, or fails naming the field and the value.
void assign(const Field& field, const toml::node& node, const std::string& origin,
            Unmatched& unmatched) {
  KindContext ctx{field, unmatched};
  const std::string error =
      with_kind(field, [&](auto kind, auto target) { return kind.read(target, node, ctx); });
  if (!error.empty())
    fail(fmt::format("{}: {} = {}: {}", origin, field.name(), node_text(node), error));
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
  // section.key.name=value: one entry of a free-form table.
  const size_t entry_dot = key.find('.');
  const std::string entry = entry_dot == std::string::npos ? "" : key.substr(entry_dot + 1);
  if (entry_dot != std::string::npos) key.resize(entry_dot);
  const Field& field = find_field(table, section, key, origin);
  auto* options = std::get_if<OptionTable*>(&field.target);
  if (entry_dot != std::string::npos && options == nullptr) {
    fail(fmt::format("{}: {} is not a table; expected section.key=value", origin, field.name()));
  }

  // Strings, choices and "auto" may be written bare (--set env.name=cartpole); the rest is TOML.
  KindContext ctx{field, unmatched};
  if (entry.empty() && with_kind(field, [&](auto kind, auto target) {
        return kind.read_word(target, value, ctx);
      })) {
    return;
  }
  check_limits("v = " + value, kMaxOverrideBytes, origin);
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    fail(fmt::format("{}: {} = {}: expected {} written as in TOML", origin,
                     entry.empty() ? field.name() : field.name() + "." + entry, value,
                     entry.empty() ? type_name(field) : "a value"));
  }
  if (entry.empty()) {
    assign(field, *parsed.get("v"), origin, unmatched);
    return;
  }
  const std::string error =
      config_schema::Kind<OptionTable*>::read_entry(*options, entry, *parsed.get("v"));
  if (!error.empty()) fail(fmt::format("{}: {}: {}", origin, field.name(), error));
}

void check_ranges(Config& config, Unmatched& unmatched) {
  for (const Field& f : config_schema::fields(config)) {
    KindContext ctx{f, unmatched};
    const std::string error =
        with_kind(f, [&](auto kind, auto target) { return kind.check(target, ctx); });
    if (!error.empty()) fail(fmt::format("{} = {}", f.name(), error));
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

bool is_python_env(const EnvConfig& env) {
  return env.plugin.empty() &&
         (env.name.starts_with("gymnasium:") || env.name.starts_with("envpool:") ||
          env.name.starts_with("python:"));
}

void validate(const Config& config) {
  Config copy = config;  // the schema table takes mutable pointers
  Unmatched none;
  check_ranges(copy, none);
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
