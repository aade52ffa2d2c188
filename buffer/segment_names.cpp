#include "buffer/segment_names.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>

#include "buffer/process.h"
#include "core/error.h"

namespace pronghorn::buffer {
namespace {

constexpr std::string_view kPrefix = "pronghorn.";
constexpr size_t kMaxKind = 15;
constexpr size_t kMaxName = 255;  // a /dev/shm file name, without the '/'
static_assert(kMaxName <= NAME_MAX);
// The longest owner and kind part: "pronghorn." pid "." start "." kind ".".
static_assert(kPrefix.size() + 10 + 1 + 20 + 1 + kMaxKind + 1 < kMaxName,
              "a name always has room for some of the run");

bool valid_kind(std::string_view kind) {
  return !kind.empty() && kind.size() <= kMaxKind &&
         std::all_of(kind.begin(), kind.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

// The decimal number `text` without sign or leading zeros ("0" itself is
// fine), or nothing.
template <typename Int>
std::optional<Int> parse_decimal(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The next '.'-separated field of `rest`, consumed with its '.'; nothing when
// there is no '.'.
std::optional<std::string_view> next_field(std::string_view& rest) {
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view field = rest.substr(0, dot);
  rest.remove_prefix(dot + 1);
  return field;
}

}  // namespace

std::string segment_name(const SegmentName& f) {
  PRONGHORN_CHECK(f.pid > 0, "segment name: pid ", f.pid, ": expected > 0");
  PRONGHORN_CHECK(valid_kind(f.kind), "segment name: kind \"", f.kind,
                  "\": expected 1 to 15 lower-case letters");
  PRONGHORN_CHECK(f.run.find('/') == std::string::npos && f.run.find('\0') == std::string::npos,
                  "segment name: run \"", f.run, "\" holds '/' or NUL");
  std::string name = std::string(kPrefix) + std::to_string(f.pid) + "." +
                     std::to_string(f.start_time) + "." + f.kind + ".";
  name += std::string_view(f.run).substr(0, kMaxName - name.size());
  return "/" + name;
}

std::string own_segment_name(std::string_view kind, std::string_view run) {
  const int pid = static_cast<int>(getpid());
  return segment_name({pid, process_start_time(pid), std::string(kind), std::string(run)});
}

std::optional<SegmentName> parse_segment_name(std::string_view name) {
  if (name.starts_with('/')) name.remove_prefix(1);
  if (name.size() > kMaxName || !name.starts_with(kPrefix)) return std::nullopt;
  if (name.find('/') != std::string_view::npos) return std::nullopt;
  std::string_view rest = name.substr(kPrefix.size());
  const auto pid_text = next_field(rest);
  const auto start_text = next_field(rest);
  const auto kind = next_field(rest);
  if (!pid_text || !start_text || !kind || !valid_kind(*kind)) return std::nullopt;
  const auto pid = parse_decimal<int>(*pid_text);
  const auto start_time = parse_decimal<uint64_t>(*start_text);
  if (!pid || *pid <= 0 || !start_time) return std::nullopt;
  return SegmentName{*pid, *start_time, std::string(*kind), std::string(rest)};
}

SegmentSweep remove_dead_segments() {
  SegmentSweep sweep;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev/shm", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string file = entry.path().filename();
    std::optional<SegmentName> fields = parse_segment_name(file);
    std::error_code type_ec;
    if (!fields || !entry.is_regular_file(type_ec)) continue;
    std::error_code size_ec;
    const uintmax_t bytes = entry.file_size(size_ec);
    Segment segment{"/" + file, std::move(*fields), size_ec ? 0 : bytes, ""};
    if (!process_gone(segment.fields.pid, segment.fields.start_time)) {
      sweep.kept.push_back(std::move(segment));
    } else if (shm_unlink(segment.name.c_str()) == 0) {
      sweep.removed.push_back(std::move(segment));
    } else if (errno != ENOENT) {  // ENOENT: another sweep removed it first
      segment.error = std::strerror(errno);
      sweep.failed.push_back(std::move(segment));
    }
  }
  return sweep;
}

}  // namespace pronghorn::buffer
