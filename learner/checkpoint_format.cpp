#include "learner/checkpoint_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/fnv.h"
#include "learner/checkpoint_statistics.h"

namespace pronghorn::learner {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoint files are little-endian and written with memcpy");

constexpr size_t kMaxSectionName = 64, kMaxParameterName = 256;
constexpr uint64_t kMaxRank = 8;
// The least a parameter tensor takes: its name's size, its rank, its data's size.
constexpr uint64_t kMinTensorBytes = 24;
constexpr std::string_view kCounters = "counters", kParameters = "parameters",
                           kOptimizer = "optimizer", kRng = "rng",
                           kReturnScaling = "return_scaling",
                           kObservationStatistics = "observation_statistics";
constexpr std::array<std::string_view, 4> kRequired = {kCounters, kParameters, kOptimizer, kRng};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string& out, std::string_view bytes) {
  put_u64(out, bytes.size());
  out += bytes;
}
std::string_view bytes_of(const float* data, size_t n) {
  return {reinterpret_cast<const char*>(data), n * sizeof(float)};
}

// Reads from a payload or a section's body, failing (false) past its end
// instead of reading on.
struct Reader {
  std::string_view in;
  size_t at = 0;
  uint64_t left() const { return in.size() - at; }
  bool u64(uint64_t& v) {
    if (left() < 8) return false;
    std::memcpy(&v, in.data() + at, 8);
    at += 8;
    return true;
  }
  bool str(std::string_view& out) {
    uint64_t n = 0;
    if (!u64(n) || n > left()) return false;
    out = in.substr(at, n);
    at += n;
    return true;
  }
};

bool section_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
}
bool parameter_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.';
}
bool valid_name(std::string_view name, size_t max, bool (*allowed)(char)) {
  return !name.empty() && name.size() <= max && std::all_of(name.begin(), name.end(), allowed);
}

// `name` quoted for one log line: its first 64 bytes, anything but
// [A-Za-z0-9_.] escaped as \xNN (a name that failed its check is the file's,
// not ours).
std::string quoted(std::string_view name) {
  std::string out = "\"";
  for (char ch : name.substr(0, 64)) {
    out += parameter_char(ch) ? std::string(1, ch)
                              : fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
  }
  return out + (name.size() > 64 ? "…\"" : "\"");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

struct SectionView {
  std::string_view name;
  uint64_t flags = 0;
  std::string_view body;
};

// The sections of a format-2 payload in file order, or nothing with `why`.
std::optional<std::vector<SectionView>> split_sections(std::string_view payload, std::string* why) {
  std::vector<SectionView> sections;
  Reader r{payload};
  while (r.left() > 0) {
    SectionView s;
    const size_t start = r.at;
    if (!r.str(s.name)) {
      *why = fmt::format("malformed payload: section {} (at byte {}) has no whole name",
                         sections.size(), start);
      return std::nullopt;
    }
    if (!valid_name(s.name, kMaxSectionName, section_char)) {
      *why = fmt::format("malformed payload: section {} is named {} (1 to {} of [a-z0-9_])",
                         sections.size(), quoted(s.name), kMaxSectionName);
      return std::nullopt;
    }
    uint64_t size = 0;
    if (!r.u64(s.flags) || !r.u64(size)) {
      *why = fmt::format("section \"{}\" is truncated: its header runs past the payload's end",
                         s.name);
      return std::nullopt;
    }
    if (size > r.left()) {
      *why = fmt::format("section \"{}\" is truncated: {} bytes declared, {} left in the payload",
                         s.name, size, r.left());
      return std::nullopt;
    }
    s.body = r.in.substr(r.at, size);
    r.at += size;
    if ((s.flags & ~kSectionOptional) != 0) {
      *why =
          fmt::format("section \"{}\" has flags {:#x}, this pronghorn knows only {:#x} (optional)",
                      s.name, s.flags, kSectionOptional);
      return std::nullopt;
    }
    for (const SectionView& earlier : sections) {
      if (earlier.name == s.name) {
        *why = fmt::format("section \"{}\" appears twice", s.name);
        return std::nullopt;
      }
    }
    sections.push_back(s);
  }
  return sections;
}

bool read_counters(std::string_view body, RunCounters& c, std::string* why) {
  if (body.size() != sizeof c) {
    *why = fmt::format("section \"counters\" holds {} bytes, expected {} (four u64)", body.size(),
                       sizeof c);
    return false;
  }
  Reader r{body};
  r.u64(c.env_steps);
  r.u64(c.learner_steps);
  r.u64(c.episodes);
  r.u64(c.policy_version);
  return true;
}

// Appends one parameter tensor of the "parameters" section to `c`.
bool read_tensor(Reader& r, size_t index, std::set<std::string_view>& names, Checkpoint& c,
                 std::string* why) {
  std::string_view name;
  if (!r.str(name)) {
    *why = fmt::format("section \"parameters\" is truncated in parameter tensor {}'s name", index);
    return false;
  }
  if (!valid_name(name, kMaxParameterName, parameter_char)) {
    *why = fmt::format(
        "section \"parameters\": parameter tensor {} is named {} (1 to {} of "
        "[A-Za-z0-9_.])",
        index, quoted(name), kMaxParameterName);
    return false;
  }
  if (!names.insert(name).second) {
    *why = fmt::format("section \"parameters\": parameter \"{}\" appears twice", name);
    return false;
  }
  uint64_t rank = 0;
  if (!r.u64(rank) || rank > kMaxRank) {
    *why = rank > kMaxRank
               ? fmt::format("parameter \"{}\" has rank {}, at most {}", name, rank, kMaxRank)
               : fmt::format("section \"parameters\" is truncated in \"{}\"", name);
    return false;
  }
  NamedShape entry{std::string(name), {}};
  uint64_t count = 1;
  for (uint64_t d = 0; d < rank; ++d) {
    uint64_t dim = 0;
    if (!r.u64(dim)) {
      *why = fmt::format("section \"parameters\" is truncated in \"{}\"'s shape", name);
      return false;
    }
    if (dim > (uint64_t{1} << 40) || __builtin_mul_overflow(count, dim, &count) ||
        count > (uint64_t{1} << 40)) {
      *why =
          fmt::format("parameter \"{}\" has a dimension of {}: no model is that large", name, dim);
      return false;
    }
    entry.shape.push_back(static_cast<int64_t>(dim));
  }
  std::string_view data;
  if (!r.str(data)) {
    *why = fmt::format("section \"parameters\" is truncated in \"{}\"'s data", name);
    return false;
  }
  if (data.size() != count * sizeof(float)) {
    *why = fmt::format("parameter \"{}\" holds {} bytes, its shape {} needs {} (float32)", name,
                       data.size(), shape_text(entry.shape), count * sizeof(float));
    return false;
  }
  const size_t at = c.parameters.size();
  c.parameters.resize(at + count);
  std::memcpy(c.parameters.data() + at, data.data(), data.size());
  c.parameter_layout.push_back(std::move(entry));
  return true;
}

bool read_parameters(std::string_view body, Checkpoint& c, std::string* why) {
  Reader r{body};
  uint64_t count = 0;
  if (!r.u64(count)) {
    *why = "section \"parameters\" is truncated: no tensor count";
    return false;
  }
  if (count > r.left() / kMinTensorBytes) {
    *why = fmt::format("section \"parameters\" promises {} tensors in {} bytes", count, r.left());
    return false;
  }
  std::set<std::string_view> names;
  for (size_t i = 0; i < count; ++i) {
    if (!read_tensor(r, i, names, c, why)) return false;
  }
  if (r.left() != 0) {
    *why = fmt::format("section \"parameters\" has {} bytes after its {} tensors", r.left(), count);
    return false;
  }
  return true;
}

std::optional<Checkpoint> decode_sections(std::string_view payload, std::string* why) {
  const std::optional<std::vector<SectionView>> sections = split_sections(payload, why);
  if (!sections) return std::nullopt;
  Checkpoint c;
  for (const SectionView& s : *sections) {
    if (s.name == kCounters) {
      if (!read_counters(s.body, c.counters, why)) return std::nullopt;
    } else if (s.name == kParameters) {
      if (!read_parameters(s.body, c, why)) return std::nullopt;
    } else if (s.name == kOptimizer) {
      c.optimizer.assign(s.body);
    } else if (s.name == kRng) {
      c.rng.assign(s.body);
    } else if (s.name == kReturnScaling) {
      if (!read_return_stats(s.body, c.return_stats, why)) return std::nullopt;
    } else if (s.name == kObservationStatistics) {
      if (!read_observation_stats(s.body, c.observation_stats, why)) return std::nullopt;
    } else if ((s.flags & kSectionOptional) == 0) {
      *why = fmt::format(
          "section \"{}\" is not one this pronghorn reads and is not marked optional (a newer "
          "pronghorn's checkpoint?)",
          s.name);
      return std::nullopt;
    }
  }
  for (std::string_view required : kRequired) {
    if (std::none_of(sections->begin(), sections->end(),
                     [&](const SectionView& s) { return s.name == required; })) {
      *why = fmt::format("no \"{}\" section", required);
      return std::nullopt;
    }
  }
  return c;
}

// Format 1: one record, no names.
std::optional<Checkpoint> decode_record(std::string_view payload, std::string* why) {
  Checkpoint c;
  Reader r{payload};
  std::string_view params, optimizer, rng;
  if (!r.u64(c.counters.env_steps) || !r.u64(c.counters.learner_steps) ||
      !r.u64(c.counters.episodes) || !r.u64(c.counters.policy_version) || !r.str(params)) {
    *why = "malformed payload: its counters or parameters run past its end";
    return std::nullopt;
  }
  if (!r.str(optimizer) || !r.str(rng) || r.left() != 0) {
    *why = "malformed payload: its optimizer or RNG state does not fit it";
    return std::nullopt;
  }
  if (params.size() % sizeof(float) != 0) {
    *why = fmt::format("malformed payload: {} bytes of parameters, not a whole number of floats",
                       params.size());
    return std::nullopt;
  }
  c.parameters.resize(params.size() / sizeof(float));
  std::memcpy(c.parameters.data(), params.data(), params.size());
  c.optimizer.assign(optimizer);
  c.rng.assign(rng);
  return c;
}

}  // namespace

std::vector<Section> sections_of(const Checkpoint& c) {
  std::string counters;
  for (uint64_t v : {c.counters.env_steps, c.counters.learner_steps, c.counters.episodes,
                     c.counters.policy_version}) {
    put_u64(counters, v);
  }
  std::string parameters;
  put_u64(parameters, c.parameter_layout.size());
  size_t at = 0;
  for (const NamedShape& p : c.parameter_layout) {
    PRONGHORN_ASSERT(valid_name(p.name, kMaxParameterName, parameter_char), "parameter ", p.name);
    put_str(parameters, p.name);
    put_u64(parameters, p.shape.size());
    size_t count = 1;
    for (int64_t dim : p.shape) {
      PRONGHORN_ASSERT(dim >= 0, "parameter ", p.name);
      put_u64(parameters, static_cast<uint64_t>(dim));
      count *= static_cast<size_t>(dim);
    }
    PRONGHORN_ASSERT(at + count <= c.parameters.size(), "the layout outruns the parameters at ",
                     p.name);
    put_str(parameters, bytes_of(c.parameters.data() + at, count));
    at += count;
  }
  PRONGHORN_ASSERT(at == c.parameters.size(), "the layout covers ", at, " of ", c.parameters.size(),
                   " parameters");
  std::vector<Section> sections = {{std::string(kCounters), 0, std::move(counters)},
                                   {std::string(kParameters), 0, std::move(parameters)},
                                   {std::string(kOptimizer), 0, c.optimizer},
                                   {std::string(kRng), 0, c.rng}};
  if (c.return_stats) {  // optional: the policy means the same without it
    sections.push_back(
        {std::string(kReturnScaling), kSectionOptional, return_stats_body(*c.return_stats)});
  }
  if (c.observation_stats) {  // required: without it the policy differs
    sections.push_back(
        {std::string(kObservationStatistics), 0, observation_stats_body(*c.observation_stats)});
  }
  return sections;
}

std::string encode_sections(const std::vector<Section>& sections) {
  std::string payload;
  for (const Section& s : sections) {
    put_str(payload, s.name);
    put_u64(payload, s.flags);
    put_str(payload, s.body);
  }
  return payload;
}

std::string frame_payload(int format, std::string_view payload) {
  std::string file = fmt::format("{}{:02}", kMagicPrefix, format);
  put_u64(file, payload.size());
  file += payload;
  put_u64(file, fnv1a(payload));
  return file;
}

std::string encode_checkpoint(const Checkpoint& c) {
  return frame_payload(kFormatWritten, encode_sections(sections_of(c)));
}

std::optional<Checkpoint> decode_payload(int format, std::string_view payload, std::string* why) {
  PRONGHORN_ASSERT(format == 1 || format == 2, "format ", format);
  return format == 1 ? decode_record(payload, why) : decode_sections(payload, why);
}

}  // namespace pronghorn::learner
