#include "core/toml_limits.h"

#include <fmt/format.h>

#include <vector>

namespace pronghorn {
namespace {

// One pass over the text that knows just enough TOML to tell keys from
// values: strings (basic, literal, multi-line), comments, table headers,
// `key =`, and the brackets of arrays and inline tables.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  std::string run() {
    while (at_ < text_.size() && problem_.empty()) step();
    return problem_;
  }

 private:
  void step() {
    const char ch = text_[at_];
    if (ch == '\n') {
      ++line_;
      ++at_;
      if (open_.empty()) want_key_ = true;  // a new line at the top level starts a key
      // Skips like the last branch, but must come before the want_key_ one.
      // NOLINTNEXTLINE(bugprone-branch-clone)
    } else if (ch == ' ' || ch == '\t' || ch == '\r') {
      ++at_;
    } else if (ch == '#') {
      while (at_ < text_.size() && text_[at_] != '\n') ++at_;
    } else if (want_key_) {
      key();
    } else if (ch == '"' || ch == '\'') {
      skip_string();
    } else if (ch == '[' || ch == '{') {
      open_.push_back(ch);
      if (open_.size() > static_cast<size_t>(kMaxNesting)) {
        fail(fmt::format("arrays or inline tables nested {} deep; at most {}", open_.size(),
                         kMaxNesting));
      }
      want_key_ = ch == '{';
      ++at_;
    } else if (ch == ']' || ch == '}') {
      if (!open_.empty()) open_.pop_back();
      ++at_;
    } else if (ch == ',') {
      want_key_ = !open_.empty() && open_.back() == '{';
      ++at_;
    } else {
      ++at_;
    }
  }

  // A `[table]` or `[[array]]` header at the top level, else a key up to
  // its '='; counts the dots outside quoted parts.
  void key() {
    const bool header = open_.empty() && text_[at_] == '[';
    while (header && at_ < text_.size() && text_[at_] == '[') ++at_;
    int parts = 1;
    while (at_ < text_.size()) {
      const char ch = text_[at_];
      if (ch == '"' || ch == '\'') {
        skip_string();
        continue;
      }
      if (ch == (header ? ']' : '=') || ch == '\n' || ch == '#' || ch == '}') break;
      if (ch == '.') ++parts;
      ++at_;
    }
    if (parts > kMaxKeyParts) {
      fail(fmt::format("a {} of {} dotted parts; at most {}", header ? "[table] header" : "key",
                       parts, kMaxKeyParts));
    }
    while (header && at_ < text_.size() && text_[at_] == ']') ++at_;
    if (!header && at_ < text_.size() && text_[at_] == '=') ++at_;
    want_key_ = false;
  }

  void skip_string() {
    const char quote = text_[at_];
    const std::string_view triple(quote == '"' ? "\"\"\"" : "'''");
    const bool multi_line = text_.substr(at_, 3) == triple;
    at_ += multi_line ? 3 : 1;
    while (at_ < text_.size()) {
      const char ch = text_[at_];
      if (ch == '\\' && quote == '"') {  // escapes exist in basic strings only
        if (at_ + 1 < text_.size() && text_[at_ + 1] == '\n') ++line_;
        at_ += 2;
        continue;
      }
      if (ch == '\n') {
        if (!multi_line) return;  // unterminated: toml++ says so
        ++line_;
      }
      if (multi_line ? text_.substr(at_, 3) == triple : ch == quote) {
        at_ += multi_line ? 3 : 1;
        return;
      }
      ++at_;
    }
  }

  void fail(const std::string& what) { problem_ = fmt::format("line {}: {}", line_, what); }

  std::string_view text_;
  size_t at_ = 0;
  size_t line_ = 1;
  bool want_key_ = true;
  std::vector<char> open_;  // '[' and '{' not yet closed
  std::string problem_;
};

}  // namespace

std::string check_toml_limits(std::string_view text) { return Scanner(text).run(); }

}  // namespace pronghorn
