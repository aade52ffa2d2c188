#include "learner/checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "core/fnv.h"

namespace pronghorn::learner {
namespace {

namespace fs = std::filesystem;
constexpr char kMagic[8] = {'P', 'H', 'C', 'K', 'P', 'T', '0', '1'};

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_bytes(std::string& out, const std::string& bytes) {
  put_u64(out, bytes.size());
  out += bytes;
}

// Reads from a payload, failing (false) past its end instead of reading on.
struct Reader {
  const std::string& in;
  size_t at = 0;
  bool u64(uint64_t& v) {
    if (at + 8 > in.size()) return false;
    std::memcpy(&v, in.data() + at, 8);
    at += 8;
    return true;
  }
  bool bytes(std::string& out) {
    uint64_t n = 0;
    if (!u64(n) || n > in.size() - at) return false;
    out.assign(in, at, n);
    at += n;
    return true;
  }
};

uint64_t step_of(const fs::path& p) {
  const std::string name = p.filename().string();  // step-<n>.ckpt
  if (name.rfind("step-", 0) != 0 || p.extension() != ".ckpt") return UINT64_MAX;
  return std::strtoull(name.c_str() + 5, nullptr, 10);
}

std::vector<fs::path> checkpoints_newest_first(const std::string& folder) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (step_of(entry.path()) != UINT64_MAX) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end(),
            [](const fs::path& a, const fs::path& b) { return step_of(a) > step_of(b); });
  return found;
}

// The checkpoint in `path`, or the reason it is not valid.
std::optional<Checkpoint> read_checkpoint(const fs::path& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < 24 || std::memcmp(file.data(), kMagic, 8) != 0) {
    *why = "not a checkpoint or truncated";
    return std::nullopt;
  }
  uint64_t payload_bytes = 0, checksum = 0;
  std::memcpy(&payload_bytes, file.data() + 8, 8);
  if (payload_bytes != file.size() - 24) {
    *why = "truncated";
    return std::nullopt;
  }
  const std::string payload = file.substr(16, payload_bytes);
  std::memcpy(&checksum, file.data() + 16 + payload_bytes, 8);
  if (checksum != fnv1a(payload)) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  Checkpoint c;
  Reader r{payload};
  std::string params;
  if (!r.u64(c.env_steps) || !r.u64(c.learner_steps) || !r.u64(c.episodes) ||
      !r.u64(c.policy_version) || !r.bytes(params) || !r.bytes(c.optimizer) || !r.bytes(c.rng) ||
      params.size() % sizeof(float) != 0) {
    *why = "malformed payload";
    return std::nullopt;
  }
  c.parameters.resize(params.size() / sizeof(float));
  std::memcpy(c.parameters.data(), params.data(), params.size());
  return c;
}

}  // namespace

std::string save_checkpoint(const std::string& folder, const Checkpoint& c, int keep) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  PRONGHORN_CHECK(!ec, "checkpoint folder ", folder, ": ", ec.message());
  std::string payload;
  put_u64(payload, c.env_steps);
  put_u64(payload, c.learner_steps);
  put_u64(payload, c.episodes);
  put_u64(payload, c.policy_version);
  put_bytes(payload, std::string(reinterpret_cast<const char*>(c.parameters.data()),
                                 c.parameters.size() * sizeof(float)));
  put_bytes(payload, c.optimizer);
  put_bytes(payload, c.rng);
  std::string file(kMagic, 8);
  put_u64(file, payload.size());
  file += payload;
  put_u64(file, fnv1a(payload));

  const std::string path = folder + "/step-" + std::to_string(c.learner_steps) + ".ckpt";
  write_file_atomically(path, file, 0600);
  std::vector<fs::path> all = checkpoints_newest_first(folder);
  for (size_t i = static_cast<size_t>(std::max(1, keep)); i < all.size(); ++i) fs::remove(all[i], ec);
  return path;
}

Checkpoint load_checkpoint(const std::string& path) {
  PRONGHORN_CHECK(fs::is_regular_file(path), "checkpoint ", path, ": no such file");
  std::string why;
  std::optional<Checkpoint> c = read_checkpoint(path, &why);
  PRONGHORN_CHECK(c.has_value(), "checkpoint ", path, ": ", why);
  return *c;
}

std::optional<Checkpoint> load_newest_checkpoint(const std::string& folder, std::string* path) {
  for (const fs::path& p : checkpoints_newest_first(folder)) {
    std::string why;
    if (auto c = read_checkpoint(p, &why)) {
      if (path != nullptr) *path = p.string();
      return c;
    }
    spdlog::warn("checkpoint {} skipped: {}", p.string(), why);
  }
  return std::nullopt;
}

}  // namespace pronghorn::learner
