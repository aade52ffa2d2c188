#include "learner/checkpoint.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/error.h"
#include "core/files.h"
#include "core/fnv.h"
#include "learner/checkpoint_format.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kHeaderBytes = kFileHeaderBytes, kTrailerBytes = kFileTrailerBytes;
constexpr std::string_view kPrefix = "env-steps-", kEarlierPrefix = "step-", kSuffix = ".ckpt";
constexpr int kNameDigits = 20;  // any uint64, so every name sorts by its number
// A learner publishes one version per step and one when it starts: a
// checkpoint's version is its learner steps plus the number of starts.
constexpr uint64_t kMaxStarts = uint64_t{1} << 32;

// Where a name puts a file among checkpoints: the current naming after the
// earlier one, then by the number. Nothing for a name that is not a checkpoint's.
struct NameKey {
  bool current = false;  // env-steps-N (else step-N, N learner steps)
  uint64_t number = 0;
  bool operator<(const NameKey& o) const {
    return current != o.current ? !current : number < o.number;
  }
};

std::optional<NameKey> name_key(std::string_view name) {
  if (name.size() <= kSuffix.size() || name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return std::nullopt;
  }
  name.remove_suffix(kSuffix.size());
  NameKey key;
  if (name.substr(0, kPrefix.size()) == kPrefix) {
    key.current = true;
    name.remove_prefix(kPrefix.size());
  } else if (name.substr(0, kEarlierPrefix.size()) == kEarlierPrefix) {
    name.remove_prefix(kEarlierPrefix.size());
  } else {
    return std::nullopt;
  }
  if (name.empty() || name.size() > kNameDigits) return std::nullopt;
  for (char ch : name) {
    if (ch < '0' || ch > '9') return std::nullopt;
    if (__builtin_mul_overflow(key.number, 10, &key.number) ||
        __builtin_add_overflow(key.number, static_cast<uint64_t>(ch - '0'), &key.number)) {
      return std::nullopt;
    }
  }
  return key;
}

struct Candidate {
  fs::path path;
  NameKey key;
};

std::vector<Candidate> candidates_newest_first(const std::string& folder) {
  std::vector<Candidate> found;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (auto key = name_key(it->path().filename().string())) found.push_back({it->path(), *key});
  }
  std::sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) {
    if (a.key < b.key || b.key < a.key) return b.key < a.key;
    return a.path > b.path;  // the same number written twice: any fixed order
  });
  return found;
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `n` bytes; false with `why` on an error or an early end.
bool read_exactly(int fd, char* out, uint64_t n, std::string* why) {
  while (n > 0) {
    const ssize_t got = ::read(fd, out, std::min<uint64_t>(n, 1 << 24));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      *why = std::string("cannot read it: ") + std::strerror(errno);
      return false;
    }
    if (got == 0) {
      *why = "truncated while being read";
      return false;
    }
    out += got;
    n -= static_cast<uint64_t>(got);
  }
  return true;
}

struct Payload {
  int format = 0;  // 1 or 2, from the magic
  std::string bytes;
};

// The format a file's first 8 bytes name, or 0 with `why`.
int format_of(const char* magic, std::string* why) {
  const size_t prefix = std::strlen(kMagicPrefix);
  if (std::memcmp(magic, kMagicPrefix, prefix) != 0 || magic[6] < '0' || magic[6] > '9' ||
      magic[7] < '0' || magic[7] > '9') {
    *why = "not a checkpoint (no PHCKPT02 or PHCKPT01 header)";
    return 0;
  }
  const int format = (magic[6] - '0') * 10 + (magic[7] - '0');
  if (format < 1 || format > kFormatWritten) {
    *why = fmt::format(
        "a checkpoint of format {:02}, this pronghorn reads formats 01 to {:02} (a newer "
        "pronghorn's?)",
        format, kFormatWritten);
    return 0;
  }
  return format;
}

// The payload of a regular file whose sizes and checksum agree; never blocks
// (O_NONBLOCK: opening a FIFO without a writer returns at once) and never
// reads more than the file's size, the header's, or `max_bytes`.
std::optional<Payload> read_payload(const std::string& path, uint64_t max_bytes, std::string* why) {
  Fd file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0) {
    *why = std::string("cannot open it: ") + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) {
    *why = std::string("cannot stat it: ") + std::strerror(errno);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = kind_of(st.st_mode) + ", not a checkpoint file";
    return std::nullopt;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes + kTrailerBytes) {
    *why = fmt::format("truncated: {} bytes, a checkpoint has at least {}", size,
                       kHeaderBytes + kTrailerBytes);
    return std::nullopt;
  }
  char header[kHeaderBytes];
  if (!read_exactly(file.fd, header, kHeaderBytes, why)) return std::nullopt;
  const int format = format_of(header, why);
  if (format == 0) return std::nullopt;
  uint64_t payload_bytes = 0;
  std::memcpy(&payload_bytes, header + 8, 8);
  if (payload_bytes != size - kHeaderBytes - kTrailerBytes) {
    *why = fmt::format("truncated: its header promises {} bytes of payload, the file holds {}",
                       payload_bytes, size - kHeaderBytes - kTrailerBytes);
    return std::nullopt;
  }
  if (size > max_bytes) {
    *why = fmt::format("{} bytes, more than the {} a checkpoint of this model can take", size,
                       max_bytes);
    return std::nullopt;
  }
  std::string rest(payload_bytes + kTrailerBytes, '\0');
  if (!read_exactly(file.fd, rest.data(), rest.size(), why)) return std::nullopt;
  uint64_t checksum = 0;
  std::memcpy(&checksum, rest.data() + payload_bytes, 8);
  rest.resize(payload_bytes);
  if (checksum != fnv1a(rest)) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  return Payload{format, std::move(rest)};
}

// " (in \"name\")", the parameter tensor that holds flat parameter `index`;
// "" when the checkpoint names none (format 1).
std::string tensor_of(const Checkpoint& c, size_t index) {
  size_t end = 0;
  for (const NamedShape& p : c.parameter_layout) {
    size_t count = 1;
    for (int64_t dim : p.shape) count *= static_cast<size_t>(dim);
    end += count;
    if (index < end) return fmt::format(" (in \"{}\")", p.name);
  }
  return "";
}

// What is wrong with fields that passed the checksum, or "" (a file can be
// written whole by something else, or by a learner that had already gone wrong).
std::string check_fields(const Checkpoint& ck) {
  const RunCounters& c = ck.counters;
  if (c.env_steps > kMaxCounter) {
    return fmt::format("env_steps = {}: more than any run takes (at most 2^63)", c.env_steps);
  }
  if (c.learner_steps > c.env_steps || (c.learner_steps == 0) != (c.env_steps == 0)) {
    return fmt::format(
        "learner_steps = {} with env_steps = {}: each learner step trains on "
        "at least one env step, and env steps come only from learner steps",
        c.learner_steps, c.env_steps);
  }
  if (c.episodes > c.env_steps) {
    return fmt::format("episodes = {} exceeds env_steps = {}", c.episodes, c.env_steps);
  }
  if (c.policy_version < c.learner_steps || c.policy_version - c.learner_steps > kMaxStarts) {
    return fmt::format(
        "policy_version = {} with learner_steps = {}: expected one version per "
        "learner step and one per start",
        c.policy_version, c.learner_steps);
  }
  if (ck.parameters.empty()) return "no parameters";
  for (size_t i = 0; i < ck.parameters.size(); ++i) {
    if (!std::isfinite(ck.parameters[i])) {
      return fmt::format("parameter {} of {} is {}{}: the model it holds had diverged", i,
                         ck.parameters.size(), ck.parameters[i], tensor_of(ck, i));
    }
  }
  return "";
}

}  // namespace

std::string checkpoint_file_name(uint64_t env_steps) {
  return fmt::format("{}{:0{}}{}", kPrefix, env_steps, kNameDigits, kSuffix);
}

void write_checkpoint_file(const std::string& path, const Checkpoint& c) {
  write_file_atomically(path, encode_checkpoint(c), 0600);
}

std::string save_checkpoint(const std::string& folder, const Checkpoint& c, int keep) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  PRONGHORN_CHECK(!ec, "checkpoint folder ", folder, ": ", ec.message());
  std::string path = folder + "/" + checkpoint_file_name(c.counters.env_steps);
  write_checkpoint_file(path, c);
  // Only regular files are ours to remove: a directory or a FIFO someone put
  // here is left alone, and counts for nothing.
  const NameKey written{true, c.counters.env_steps};
  size_t kept = 1;
  for (const Candidate& old : candidates_newest_first(folder)) {
    if (!(old.key < written) || !fs::is_regular_file(fs::symlink_status(old.path, ec))) continue;
    if (kept++ >= static_cast<size_t>(std::max(1, keep))) fs::remove(old.path, ec);
  }
  return path;
}

std::vector<std::string> checkpoint_candidates(const std::string& folder) {
  std::vector<std::string> paths;
  for (const Candidate& c : candidates_newest_first(folder)) paths.push_back(c.path.string());
  return paths;
}

std::optional<Checkpoint> read_checkpoint(const std::string& path, std::string* why,
                                          uint64_t max_bytes) {
  const std::optional<Payload> payload = read_payload(path, max_bytes, why);
  if (!payload) return std::nullopt;
  std::optional<Checkpoint> c = decode_payload(payload->format, payload->bytes, why);
  if (!c) return std::nullopt;
  *why = check_fields(*c);
  // Names order the candidates, so a file must hold what its name says.
  const std::optional<NameKey> key = name_key(fs::path(path).filename().string());
  const RunCounters& n = c->counters;
  if (why->empty() && key && key->number != (key->current ? n.env_steps : n.learner_steps)) {
    *why =
        fmt::format("its name says {} {} steps, it holds {}", key->number,
                    key->current ? "env" : "learner", key->current ? n.env_steps : n.learner_steps);
  }
  if (!why->empty()) return std::nullopt;
  return c;
}

Checkpoint load_checkpoint(const std::string& path) {
  std::string why;
  std::optional<Checkpoint> c = read_checkpoint(path, &why);
  PRONGHORN_CHECK(c.has_value(), "checkpoint ", path, ": ", why);
  return std::move(*c);
}

std::optional<Checkpoint> load_newest_checkpoint(const std::string& folder, std::string* path) {
  for (const std::string& p : checkpoint_candidates(folder)) {
    std::string why;
    if (auto c = read_checkpoint(p, &why)) {
      if (path != nullptr) *path = p;
      return c;
    }
    spdlog::warn("checkpoint {} skipped: {}", p, why);
  }
  return std::nullopt;
}

}  // namespace pronghorn::learner
