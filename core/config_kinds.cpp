#include "core/config_kinds.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "core/suggest.h"

namespace pronghorn::config_schema {
namespace {

// The word an "auto or a number" key takes for "auto" (its empty value).
constexpr std::string_view kAuto = "auto";

bool out_of_range(double v, const Field& f) { return !(v >= f.min && v <= f.max); }

std::string integer_range(const Field& f) {
  return fmt::format("in [{}, {}]", static_cast<int64_t>(f.min), static_cast<int64_t>(f.max));
}

std::string number_range(const Field& f) {
  return fmt::format("in [{}, {}]", format_number(f.min), format_number(f.max));
}

// A bare word after --set: anything not starting with a quote (which is TOML).
bool bare(std::string_view word) {
  return word.empty() || (word.front() != '"' && word.front() != '\'');
}

std::string expected(std::string_view name) { return fmt::format("expected {}", name); }

// An option's name: a keyword argument's (Python's identifiers, ASCII).
bool option_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
}

bool option_scalar(const toml::node& node) {
  return node.is_string() || node.is_integer() || node.is_floating_point() || node.is_boolean();
}

// Stores the index of `word` among the row's choices, or keeps the word in
// ctx.unmatched for check() to refuse.
void set_choice(ChoiceRef v, std::string_view word, KindContext& ctx) {
  const auto found = std::find(ctx.field.choices.begin(), ctx.field.choices.end(), word);
  if (found == ctx.field.choices.end()) {
    ctx.unmatched[ctx.field.name()] = word;
    return;
  }
  ctx.unmatched.erase(ctx.field.name());
  v.set(v.target, static_cast<int>(found - ctx.field.choices.begin()));
}

}  // namespace

std::string node_text(const toml::node& node) {
  if (node.is_string()) return quoted(node.as_string()->get());  // toml++ would use '...'
  if (const toml::array* array = node.as_array()) {
    std::string out = "[";
    for (const toml::node& item : *array) out += (out.size() > 1 ? ", " : "") + node_text(item);
    return out + "]";
  }
  std::ostringstream out;
  node.visit([&out](const auto& value) { out << value; });
  return out.str();
}

std::string format_number(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Integers.
std::string Kind<int64_t*>::read(int64_t* v, const toml::node& node, KindContext&) {
  if (!node.is_integer()) return expected(kName);
  *v = node.as_integer()->get();
  return "";
}
std::string Kind<int64_t*>::format(const int64_t* v, const Field&) { return std::to_string(*v); }
std::string Kind<int64_t*>::check(const int64_t* v, KindContext& ctx) {
  if (!out_of_range(static_cast<double>(*v), ctx.field)) return "";
  return fmt::format("{}: expected an integer {}", *v, integer_range(ctx.field));
}

// Numbers: an integer is taken as one.
std::string Kind<double*>::read(double* v, const toml::node& node, KindContext&) {
  if (node.is_integer()) {
    *v = static_cast<double>(node.as_integer()->get());
  } else if (node.is_floating_point()) {
    *v = node.as_floating_point()->get();
  } else {
    return expected(kName);
  }
  return "";
}
std::string Kind<double*>::format(const double* v, const Field&) { return format_number(*v); }
std::string Kind<double*>::check(const double* v, KindContext& ctx) {
  if (!out_of_range(*v, ctx.field)) return "";
  return fmt::format("{}: expected a number {}", format_number(*v), number_range(ctx.field));
}

// Strings.
std::string Kind<std::string*>::read(std::string* v, const toml::node& node, KindContext&) {
  if (!node.is_string()) return expected(kName);
  *v = node.as_string()->get();
  return "";
}
bool Kind<std::string*>::read_word(std::string* v, std::string_view word, KindContext&) {
  if (!bare(word)) return false;
  *v = word;
  return true;
}
std::string Kind<std::string*>::format(const std::string* v, const Field&) { return quoted(*v); }

// Lists of integers, each item in the row's range.
std::string Kind<std::vector<int64_t>*>::read(std::vector<int64_t>* v, const toml::node& node,
                                              KindContext&) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return expected(kName);
  std::vector<int64_t> items;
  for (const toml::node& item : *array) {
    if (!item.is_integer()) return expected(kName);
    items.push_back(item.as_integer()->get());
  }
  *v = std::move(items);
  return "";
}
std::string Kind<std::vector<int64_t>*>::format(const std::vector<int64_t>* v, const Field&) {
  return "[" + fmt::format("{}", fmt::join(*v, ", ")) + "]";
}
std::string Kind<std::vector<int64_t>*>::check(const std::vector<int64_t>* v, KindContext& ctx) {
  for (int64_t item : *v) {
    if (out_of_range(static_cast<double>(item), ctx.field)) {
      return fmt::format("{}: expected every item {}", format(v, ctx.field),
                         integer_range(ctx.field));
    }
  }
  return "";
}

// Lists of names: letters, digits and _ . / -, each once, at most the row's
// max of them (names that go into metric names and TensorBoard tags).
std::string Kind<std::vector<std::string>*>::read(std::vector<std::string>* v,
                                                  const toml::node& node, KindContext&) {
  const toml::array* array = node.as_array();
  if (array == nullptr) return expected(kName);
  std::vector<std::string> items;
  for (const toml::node& item : *array) {
    if (!item.is_string()) return expected(kName);
    items.push_back(item.as_string()->get());
  }
  *v = std::move(items);
  return "";
}
std::string Kind<std::vector<std::string>*>::format(const std::vector<std::string>* v,
                                                    const Field&) {
  std::vector<std::string> items;
  for (const std::string& item : *v) items.push_back(quoted(item));
  return "[" + fmt::format("{}", fmt::join(items, ", ")) + "]";
}
std::string Kind<std::vector<std::string>*>::check(const std::vector<std::string>* v,
                                                   KindContext& ctx) {
  if (static_cast<double>(v->size()) > ctx.field.max) {
    return fmt::format("{}: expected at most {:g} names", format(v, ctx.field), ctx.field.max);
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string& name = (*v)[i];
    const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
             c == '-';
    });
    const bool empty_part =
        name.front() == '/' || name.back() == '/' || name.find("//") != std::string::npos;
    if (!plain || empty_part) {
      return fmt::format(
          "{}: expected names of letters, digits and _ . / -, no empty part between slashes (not "
          "{})",
          format(v, ctx.field), quoted(name));
    }
    if (std::find(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(i), name) !=
        v->begin() + static_cast<std::ptrdiff_t>(i)) {
      return fmt::format("{}: {} is named twice", format(v, ctx.field), quoted(name));
    }
  }
  return "";
}

// Booleans.
std::string Kind<bool*>::read(bool* v, const toml::node& node, KindContext&) {
  if (!node.is_boolean()) return expected(kName);
  *v = node.as_boolean()->get();
  return "";
}
std::string Kind<bool*>::format(const bool* v, const Field&) { return *v ? "true" : "false"; }

// "auto" or an integer.
std::string Kind<std::optional<int64_t>*>::read(std::optional<int64_t>* v, const toml::node& node,
                                                KindContext& ctx) {
  int64_t number = 0;
  if (node.is_string() && node.as_string()->get() == kAuto) {
    *v = std::nullopt;
  } else if (Kind<int64_t*>::read(&number, node, ctx).empty()) {
    *v = number;
  } else {
    return expected(kName);
  }
  return "";
}
bool Kind<std::optional<int64_t>*>::read_word(std::optional<int64_t>* v, std::string_view word,
                                              KindContext&) {
  if (word != kAuto) return false;
  *v = std::nullopt;  // --set actor.count=auto, unquoted
  return true;
}
std::string Kind<std::optional<int64_t>*>::format(const std::optional<int64_t>* v, const Field&) {
  return v->has_value() ? std::to_string(**v) : quoted(kAuto);
}
std::string Kind<std::optional<int64_t>*>::check(const std::optional<int64_t>* v,
                                                 KindContext& ctx) {
  if (!v->has_value() || !out_of_range(static_cast<double>(**v), ctx.field)) return "";
  return fmt::format("{}: expected {} or an integer {}", **v, quoted(kAuto),
                     integer_range(ctx.field));
}

// "auto" or a number.
std::string Kind<std::optional<double>*>::read(std::optional<double>* v, const toml::node& node,
                                               KindContext& ctx) {
  double number = 0;
  if (node.is_string() && node.as_string()->get() == kAuto) {
    *v = std::nullopt;
  } else if (Kind<double*>::read(&number, node, ctx).empty()) {
    *v = number;
  } else {
    return expected(kName);
  }
  return "";
}
bool Kind<std::optional<double>*>::read_word(std::optional<double>* v, std::string_view word,
                                             KindContext&) {
  if (word != kAuto) return false;
  *v = std::nullopt;  // --set run.target_return=auto
  return true;
}
std::string Kind<std::optional<double>*>::format(const std::optional<double>* v, const Field&) {
  return v->has_value() ? format_number(**v) : quoted(kAuto);
}
std::string Kind<std::optional<double>*>::check(const std::optional<double>* v, KindContext& ctx) {
  if (!v->has_value() || !out_of_range(**v, ctx.field)) return "";
  return fmt::format("{}: expected {} or a number {}", format_number(**v), quoted(kAuto),
                     number_range(ctx.field));
}

// Choices: a word not among them is kept in `unmatched` for check() to
// refuse, so that a later source may still set a valid one.
std::string Kind<ChoiceRef>::read(ChoiceRef v, const toml::node& node, KindContext& ctx) {
  if (!node.is_string()) return expected(kName);
  set_choice(v, node.as_string()->get(), ctx);
  return "";
}
bool Kind<ChoiceRef>::read_word(ChoiceRef v, std::string_view word, KindContext& ctx) {
  if (!bare(word)) return false;
  set_choice(v, word, ctx);
  return true;
}
std::string Kind<ChoiceRef>::format(ChoiceRef v, const Field& field) {
  const int index = v.get(v.target);
  return index >= 0 && index < static_cast<int>(field.choices.size())
             ? quoted(field.choices[static_cast<size_t>(index)])
             : std::to_string(index);
}
std::string Kind<ChoiceRef>::check(ChoiceRef v, KindContext& ctx) {
  const Field& f = ctx.field;
  const auto given = ctx.unmatched.find(f.name());
  const int index = v.get(v.target);
  if (given == ctx.unmatched.end() && index >= 0 && index < static_cast<int>(f.choices.size())) {
    return "";
  }
  const std::string word = given != ctx.unmatched.end() ? given->second : std::to_string(index);
  std::vector<std::string> choices(f.choices.begin(), f.choices.end());
  return fmt::format("{}: expected one of {}{}", quoted(word), fmt::join(choices, ", "),
                     did_you_mean(word, choices));
}

// Free-form tables: every entry replaced by the table given.
std::string Kind<OptionTable*>::read(OptionTable* v, const toml::node& node, KindContext&) {
  const toml::table* table = node.as_table();
  if (table == nullptr) return expected(kName);
  OptionTable entries;
  for (const auto& [name, value] : *table) {
    const std::string error = read_entry(&entries, name.str(), value);
    if (!error.empty()) return error;
  }
  *v = std::move(entries);
  return "";
}
std::string Kind<OptionTable*>::read_entry(OptionTable* v, std::string_view name,
                                           const toml::node& node) {
  if (!option_name(name)) {
    return fmt::format(
        "option {}: expected a name of letters, digits and _, not starting with a "
        "digit",
        quoted(name));
  }
  bool fits = option_scalar(node);
  if (const toml::array* array = node.as_array()) {
    fits = std::all_of(array->begin(), array->end(), option_scalar);
  }
  if (!fits) {
    return fmt::format(
        "option {} = {}: expected a string, a number, true or false, or a list "
        "of those",
        name, node_text(node));
  }
  if (!v->contains(std::string(name)) && v->size() >= kMaxEntries) {
    return fmt::format("option {}: at most {} options", name, kMaxEntries);
  }
  (*v)[std::string(name)] = node_text(node);
  return "";
}
std::string Kind<OptionTable*>::format(const OptionTable* v, const Field&) {
  if (v->empty()) return "{}";
  std::vector<std::string> entries;
  for (const auto& [name, value] : *v) entries.push_back(fmt::format("{} = {}", name, value));
  return fmt::format("{{ {} }}", fmt::join(entries, ", "));
}

}  // namespace pronghorn::config_schema
