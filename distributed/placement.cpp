// Rank, world size, rank 0's address and node name from the config and the
// launcher's environment (placement.h has the rules), and Slurm's hostlists.
#include "distributed/placement.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cstdlib>

#include "core/error.h"
#include "core/host_name.h"

namespace pronghorn::distributed {
namespace {

// The ranges of config_schema.cpp's distributed.world_size and distributed.rank.
constexpr int64_t kMaxWorldSize = 4096;

[[noreturn]] void refuse(const std::string& message) {
  throw UsageError("distributed: " + message);
}

// An environment value as it goes into a message: quoted, one line, short.
std::string shown(std::string_view value) {
  std::string out = "\"";
  for (char ch : value.substr(0, 80)) {
    out += std::iscntrl(static_cast<unsigned char>(ch)) ? '?' : ch;
  }
  return out + (value.size() > 80 ? "…\"" : "\"");
}

// A decimal integer in [min, max] (no sign, no spaces), or nullopt.
std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) {
  const bool digits =
      !text.empty() && text.size() <= 18 && std::all_of(text.begin(), text.end(), [](char ch) {
        return std::isdigit(static_cast<unsigned char>(ch));
      });
  if (!digits) return std::nullopt;
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  if (value < min || value > max) return std::nullopt;
  return value;
}

// The launchers whose environment placement reads, each found by its rank
// variable; `world_variable` holds its world size.
struct Family {
  std::string_view name;
  std::string_view rank_variable;  // empty: none (the variables any launcher may set)
  std::string_view world_variable;
  bool slurm = false;
};

constexpr Family kFamilies[] = {
    {"torchrun/Kubeflow", "RANK", "WORLD_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", true},
    {"Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", "WORLD_SIZE"},
};
constexpr Family kNoFamily = {"environment", "", "WORLD_SIZE"};

// Reads the environment through the seam and remembers which variables gave a
// value, in order, for Placement::source.
class Environment {
 public:
  explicit Environment(const GetEnv& getenv) : getenv_(getenv) {}

  // The variable's value; empty counts as unset.
  std::optional<std::string> peek(std::string_view name) const {
    std::optional<std::string> value = getenv_(std::string(name));
    if (value && value->empty()) return std::nullopt;
    return value;
  }

  // peek() that records the variable as used.
  std::optional<std::string> take(std::string_view name) {
    std::optional<std::string> value = peek(name);
    if (value) used_.emplace_back(name);
    return value;
  }

  // The variable as an integer in [min, max]; nullopt when unset.
  std::optional<int64_t> integer(std::string_view name, int64_t min, int64_t max) {
    const std::optional<std::string> text = take(name);
    if (!text) return std::nullopt;
    const std::optional<int64_t> value = parse_integer(*text, min, max);
    if (!value) {
      refuse(fmt::format("{} = {}: expected an integer in [{}, {}]", name, shown(*text), min, max));
    }
    return value;
  }

  const std::vector<std::string>& used() const { return used_; }

 private:
  const GetEnv& getenv_;
  std::vector<std::string> used_;
};

const Family& family_present(const Environment& env) {
  for (const Family& family : kFamilies) {
    if (env.peek(family.rank_variable)) return family;
  }
  return kNoFamily;
}

// MASTER_ADDR: a host, an IPv6 one with or without brackets.
std::string master_host(const std::string& text) {
  std::string host = text;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const bool ok = !host.empty() && std::none_of(host.begin(), host.end(), [](char ch) {
    return std::isspace(static_cast<unsigned char>(ch)) ||
           std::iscntrl(static_cast<unsigned char>(ch)) || ch == '[' || ch == ']' || ch == '/';
  });
  if (!ok) refuse(fmt::format("MASTER_ADDR = {}: expected rank 0's host name or IP", shown(text)));
  return host;
}

struct Address {
  std::string host;
  int port = 0;
  std::string named_by;  // the key or variable that gave the port, for the port-0 refusal
  std::string value;     // what it held
};

// Rank 0's address from the environment, or nullopt naming what is missing.
std::optional<Address> environment_address(Environment& env, const Family& family,
                                           std::string& missing) {
  std::optional<std::string> host;
  if (const auto addr = env.take("MASTER_ADDR")) {
    host = master_host(*addr);
  } else if (family.slurm) {
    if (const auto nodelist = env.take("SLURM_JOB_NODELIST")) {
      host = expand_hostlist(*nodelist, 1).front();
    }
  }
  Address address;
  std::optional<int64_t> port = env.integer("MASTER_PORT", 0, 65535);
  if (port) {
    address.named_by = "MASTER_PORT";
    address.value = *env.peek("MASTER_PORT");
  } else if (family.slurm) {
    if (const auto job = env.integer("SLURM_JOB_ID", 0, INT64_MAX / 2)) {
      port = kSlurmPortBase + *job % kSlurmPortSpan;
    }
  }
  if (!host && !port) return std::nullopt;
  if (!host) {
    missing =
        family.slurm ? "MASTER_ADDR and SLURM_JOB_NODELIST are unset" : "MASTER_ADDR is unset";
    return std::nullopt;
  }
  if (!port) {
    missing = family.slurm ? "MASTER_PORT and SLURM_JOB_ID are unset" : "MASTER_PORT is unset";
    return std::nullopt;
  }
  address.host = *host;
  address.port = static_cast<int>(*port);
  return address;
}

std::string host_port(const std::string& host, int port) {
  return host.find(':') == std::string::npos ? fmt::format("{}:{}", host, port)
                                             : fmt::format("[{}]:{}", host, port);
}

void resolve_node_name(Placement& placement, Environment& env, const std::string& name_flag) {
  if (!name_flag.empty()) {
    placement.node_name = name_flag;
    placement.node_name_source = "--name";
  } else if (const auto slurm = env.peek("SLURMD_NODENAME")) {
    placement.node_name = *slurm;
    placement.node_name_source = "SLURMD_NODENAME";
  } else {
    const std::string name = host_name();
    if (name.empty()) {
      placement.node_name = "unknown";
      placement.node_name_source = "hostname unavailable";
    } else {
      placement.node_name = name;
      placement.node_name_source = "hostname";
    }
  }
}

// One hostlist entry ("rack1-n[01-02]") as its parts: a literal is one
// alternative, a bracket group its numbers, each as long as its range's
// lower bound ("003" keeps "gpu[003-004]" padded). At most `limit`
// alternatives per group: the first `limit` hosts need no more.
std::vector<std::vector<std::string>> entry_parts(std::string_view entry, size_t limit,
                                                  const std::function<void()>& malformed) {
  std::vector<std::vector<std::string>> parts;
  size_t at = 0;
  while (at < entry.size()) {
    const size_t open = entry.find('[', at);
    const std::string_view literal = entry.substr(at, open - at);
    if (literal.find(']') != std::string_view::npos) malformed();
    if (!literal.empty()) parts.push_back({std::string(literal)});
    if (open == std::string_view::npos) break;
    const size_t close = entry.find(']', open);
    if (close == std::string_view::npos) malformed();
    const std::string_view group = entry.substr(open + 1, close - open - 1);
    if (group.find('[') != std::string_view::npos) malformed();
    std::vector<std::string> numbers;
    size_t item_start = 0;
    while (item_start <= group.size()) {
      const size_t comma = std::min(group.find(',', item_start), group.size());
      const std::string_view item = group.substr(item_start, comma - item_start);
      const size_t dash = item.find('-');
      const std::string_view lo_text = item.substr(0, dash);
      const std::string_view hi_text =
          dash == std::string_view::npos ? lo_text : item.substr(dash + 1);
      const auto lo = parse_integer(lo_text, 0, INT64_MAX);
      const auto hi = parse_integer(hi_text, 0, INT64_MAX);
      if (!lo || !hi || *hi < *lo) malformed();
      for (int64_t n = *lo; n <= *hi && numbers.size() < limit; ++n) {
        numbers.push_back(fmt::format("{:0{}}", n, lo_text.size()));
      }
      item_start = comma + 1;
    }
    parts.push_back(std::move(numbers));
    at = close + 1;
  }
  if (parts.empty()) malformed();
  return parts;
}

// Appends the product of parts[i..] after `prefix`, leftmost group slowest.
void expand_parts(const std::vector<std::vector<std::string>>& parts, size_t i,
                  const std::string& prefix, size_t limit, std::vector<std::string>& hosts) {
  if (i == parts.size()) {
    hosts.push_back(prefix);
    return;
  }
  for (const std::string& alternative : parts[i]) {
    if (hosts.size() >= limit) return;
    expand_parts(parts, i + 1, prefix + alternative, limit, hosts);
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view hostlist, size_t limit,
                                         std::string_view variable) {
  const auto malformed = [&] {
    refuse(fmt::format("{} = {}: expected a Slurm hostlist such as \"node[01-04,07],gpu1\"",
                       variable, shown(hostlist)));
  };
  std::vector<std::string> hosts;
  size_t start = 0;
  int depth = 0;
  // Entries are split at the commas outside brackets; all of them are
  // checked, only the first `limit` hosts expanded.
  for (size_t i = 0; i <= hostlist.size(); ++i) {
    if (i < hostlist.size() && hostlist[i] == '[') ++depth;
    if (i < hostlist.size() && hostlist[i] == ']') --depth;
    if (depth < 0 || depth > 1) malformed();
    if (i < hostlist.size() && (hostlist[i] != ',' || depth > 0)) continue;
    const std::string_view entry = hostlist.substr(start, i - start);
    if (entry.empty() || std::any_of(entry.begin(), entry.end(), [](char ch) {
          return std::isspace(static_cast<unsigned char>(ch)) ||
                 std::iscntrl(static_cast<unsigned char>(ch));
        })) {
      malformed();
    }
    expand_parts(entry_parts(entry, limit, malformed), 0, "", limit, hosts);
    start = i + 1;
  }
  if (depth != 0 || hosts.empty()) malformed();
  return hosts;
}

Placement resolve_placement(const DistributedConfig& config, const GetEnv& getenv,
                            const std::string& name_flag) {
  // load_config() has checked these; a DistributedConfig built in code may not have been.
  if ((config.rank && (*config.rank < 0 || *config.rank >= kMaxWorldSize)) ||
      (config.world_size && (*config.world_size < 1 || *config.world_size > kMaxWorldSize))) {
    refuse(fmt::format(
        "distributed.rank = {}, distributed.world_size = {}: expected a rank in "
        "[0, {}) and a world size in [1, {}]",
        config.rank.value_or(0), config.world_size.value_or(1), kMaxWorldSize, kMaxWorldSize));
  }
  Environment env(getenv);
  const Family& family = family_present(env);
  std::vector<std::string> config_keys;
  Placement placement;

  // distributed.world_size = 1 is a single learner whatever the environment holds.
  const bool single_by_config = config.world_size == 1;
  std::optional<int64_t> rank;
  std::string rank_from;
  if (config.rank) {
    rank = *config.rank;
    rank_from = "distributed.rank";
    config_keys.push_back(rank_from);
  } else if (!single_by_config && !family.rank_variable.empty()) {
    rank = env.integer(family.rank_variable, 0, kMaxWorldSize - 1);
    rank_from = family.rank_variable;
  }

  int64_t world_size = 1;
  std::string world_from = "no world size set";
  if (config.world_size) {
    world_size = *config.world_size;
    world_from = "distributed.world_size";
    config_keys.push_back(world_from);
  } else if (const auto w = env.integer(family.world_variable, 1, kMaxWorldSize)) {
    world_size = *w;
    world_from = family.world_variable;
  }

  if (!rank && world_size > 1) {
    refuse(fmt::format("world_size {} (from {}) but no rank: set distributed.rank or RANK",
                       world_size, world_from));
  }
  placement.rank = static_cast<int>(rank.value_or(0));
  placement.world_size = static_cast<int>(world_size);
  if (placement.rank >= placement.world_size) {
    refuse(fmt::format(
        "rank {} (from {}) is not less than world_size {} ({}): set distributed.world_size or {}",
        placement.rank, rank_from, world_size, world_from,
        family.slurm ? "SLURM_NTASKS" : "WORLD_SIZE"));
  }

  std::optional<Address> address;
  if (!config.rendezvous.empty()) {
    const std::optional<HostPort> parsed = parse_host_port(config.rendezvous);
    if (!parsed) {
      refuse(fmt::format(
          "distributed.rendezvous = \"{}\": expected HOST:PORT with a port in [0, 65535]",
          config.rendezvous));
    }
    address = Address{parsed->host, parsed->port, "distributed.rendezvous", config.rendezvous};
    config_keys.emplace_back("distributed.rendezvous");
  } else if (world_size > 1) {
    std::string missing;
    address = environment_address(env, family, missing);
    if (!address) {
      refuse(fmt::format(
          "world_size {} but no rank 0 address: set distributed.rendezvous or MASTER_ADDR and "
          "MASTER_PORT{}",
          world_size, missing.empty() ? "" : " (" + missing + ")"));
    }
  }
  if (address) {
    if (address->port == 0 && placement.rank != 0) {
      refuse(fmt::format(
          "{} = \"{}\": port 0 (any free port) is for rank 0 only; rank {} needs the port rank "
          "0 listens on",
          address->named_by.empty() ? "MASTER_PORT" : address->named_by, address->value,
          placement.rank));
    }
    placement.host = address->host;
    placement.port = static_cast<uint16_t>(address->port);
  }

  const std::vector<std::string>& used = env.used();
  const std::string from_env =
      used.empty() ? "" : fmt::format("{} ({})", family.name, fmt::join(used, ", "));
  if (config_keys.empty()) {
    placement.source = used.empty() ? "single learner" : from_env;
  } else if (used.empty()) {
    placement.source = "config";
  } else {
    placement.source = fmt::format("config ({}) and {}", fmt::join(config_keys, ", "), from_env);
  }
  resolve_node_name(placement, env, name_flag);
  return placement;
}

std::optional<std::string> process_environment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

Placement resolve_placement(const DistributedConfig& config, const std::string& name_flag) {
  return resolve_placement(config, process_environment, name_flag);
}

std::string describe(const Placement& p) {
  const std::string node = fmt::format("node {} ({})", p.node_name, p.node_name_source);
  if (p.host.empty()) {
    return fmt::format("rank {} of {} ({}), {}", p.rank, p.world_size, p.source, node);
  }
  return fmt::format("rank {} of {}, rank 0 at {} (from {}), {}", p.rank, p.world_size,
                     host_port(p.host, p.port), p.source, node);
}

}  // namespace pronghorn::distributed
