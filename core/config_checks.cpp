// The checks of a Config that span keys (one key's range is in the table,
// config_schema.cpp): batch and ring sizes, loss choices that go together,
// TLS files in pairs, a control address that is safe to listen on, a rank
// inside the world and a well-formed rendezvous address.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string_view>

#include "core/config.h"
#include "core/config_schema.h"
#include "core/error.h"

namespace pronghorn {

bool is_loopback_address(const std::string& host_port) {
  std::string host = host_port.substr(0, host_port.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return host == "localhost";
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  const auto is_digit = [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)) != 0; };
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_digit)) {
    return std::nullopt;
  }
  const int number = std::stoi(std::string(port));
  if (number > 65535) return std::nullopt;
  // [::1]:29500: the brackets keep an IPv6 host's colons apart from the port's.
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt;
  }
  const bool host_ok = !host.empty() && std::none_of(host.begin(), host.end(), [](char ch) {
    return std::isspace(static_cast<unsigned char>(ch)) ||
           std::iscntrl(static_cast<unsigned char>(ch)) || ch == '[' || ch == ']' || ch == '/';
  });
  if (!host_ok) return std::nullopt;
  return HostPort{std::string(host), number};
}

namespace {

using config_schema::fail;
using config_schema::quoted;

void check_address(const std::string& key, const std::string& address) {
  size_t colon = address.rfind(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < address.size();
  int64_t port = 0;
  for (size_t i = colon + 1; ok && i < address.size(); ++i) {
    ok = std::isdigit(static_cast<unsigned char>(address[i])) && port <= 65535;
    port = port * 10 + (address[i] - '0');
  }
  if (!ok || port > 65535) {
    fail(fmt::format("{} = {}: expected HOST:PORT with a port in [0, 65535] (0: any free port)",
                     key, quoted(address)));
  }
}

// [distributed]: rank inside the world, a rendezvous address rank 0's store
// can be reached at, an interface name the kernel could have.
void check_distributed(const DistributedConfig& d) {
  if (d.rank && d.world_size && *d.rank >= *d.world_size) {
    fail(fmt::format("distributed.rank = {}: expected less than distributed.world_size = {}",
                     *d.rank, *d.world_size));
  }
  // The others wait in their collective call while a rank waits for its batch.
  if (static_cast<double>(d.batch_wait_ms) >= 1000 * d.timeout_s) {
    fail(fmt::format(
        "distributed.batch_wait_ms = {}: expected less than distributed.timeout_s = {:g} s (the "
        "other ranks wait that long in their collective call)",
        d.batch_wait_ms, d.timeout_s));
  }
  if (!d.rendezvous.empty()) {
    const std::optional<HostPort> address = parse_host_port(d.rendezvous);
    if (!address) {
      fail(fmt::format(
          "distributed.rendezvous = {}: expected HOST:PORT of rank 0's store with a port in "
          "[0, 65535] (an IPv6 host in brackets: [::1]:29500), or empty for the environment's",
          quoted(d.rendezvous)));
    }
    if (address->port == 0 && d.rank && *d.rank != 0) {
      fail(
          fmt::format("distributed.rendezvous = {}: port 0 (any free port) is for rank 0 only; "
                      "distributed.rank = {} needs the port rank 0 listens on",
                      quoted(d.rendezvous), *d.rank));
    }
  }
  // IFNAMSIZ is 16 with the terminating zero.
  const bool interface_ok =
      d.interface.size() < 16 && std::none_of(d.interface.begin(), d.interface.end(), [](char ch) {
        return std::isspace(static_cast<unsigned char>(ch)) ||
               std::iscntrl(static_cast<unsigned char>(ch)) || ch == '/' || ch == ':';
      });
  if (!interface_ok) {
    fail(fmt::format(
        "distributed.interface = {}: expected a network interface name (e.g. \"eth0\"; at most "
        "15 characters, no spaces, '/' or ':'), or empty for the one that routes to rank 0",
        quoted(d.interface)));
  }
}

// What run.deterministic needs (docs/training.md#reproducibility): this
// node's actors in a fixed order, and room in the ring for them to act one
// batch ahead while the learner gathers the next.
void check_deterministic(const Config& c) {
  if (!c.actor.count) {
    fail(
        "run.deterministic = true: expected actor.count set to a number, not \"auto\" (which "
        "counts the cores and memory free at start, so two runs could differ)");
  }
  if (*c.actor.count == 0) {
    fail(
        "run.deterministic = true: expected actor.count above 0 (the batches come from this "
        "node's actors in a fixed order)");
  }
  if (!c.remote.address.empty()) {
    fail(
        fmt::format("run.deterministic = true: expected remote.address empty (is {}); actor-only "
                    "nodes' unrolls arrive in no fixed order",
                    quoted(c.remote.address)));
  }
  if (c.learner.ring_slots < 2 * c.learner.batch_size) {
    fail(fmt::format(
        "learner.ring_slots = {}: run.deterministic = true needs at least 2 × learner.batch_size "
        "= {} (every actor writes the next batch's unrolls while this one is gathered)",
        c.learner.ring_slots, 2 * c.learner.batch_size));
  }
}

// env.splits > 1: a Python env (the others step in the actor's own thread:
// nothing to overlap), its envs split evenly with every worker in each split.
void check_splits(const EnvConfig& env) {
  if (!is_python_env(env)) {
    fail(fmt::format(
        "env.splits = {}: expected 1 for a built-in or plugin env (they step in the actor's own "
        "thread); splits overlap a Python env's worker processes with the actor",
        env.splits));
  }
  if (env.num_envs % env.splits != 0 || env.num_envs / env.splits < env.workers) {
    fail(fmt::format(
        "env.splits = {}: expected a divisor of env.num_envs = {} that leaves each split at "
        "least env.workers = {} envs",
        env.splits, env.num_envs, env.workers));
  }
}

}  // namespace

void config_schema::check_combinations(const Config& c) {
  if (c.learner.batch_size >= c.learner.ring_slots) {
    fail(fmt::format(
        "learner.batch_size = {}: expected fewer than learner.ring_slots = {}, so actors can "
        "write while the learner holds a batch",
        c.learner.batch_size, c.learner.ring_slots));
  }
  const int64_t columns = c.learner.batch_size * c.env.num_envs;
  if (c.learner.shuffle == LearnerConfig::Shuffle::kColumns &&
      columns % c.learner.minibatches != 0) {
    fail(fmt::format(
        "learner.minibatches = {}: expected a divisor of the batch's columns, learner.batch_size "
        "× env.num_envs = {} × {} = {}",
        c.learner.minibatches, c.learner.batch_size, c.env.num_envs, columns));
  }
  if (c.learner.shuffle == LearnerConfig::Shuffle::kSteps) {
    // Single steps need advantages computed before the pass from whole
    // trajectories (GAE once per batch) and a model without state to carry.
    if (c.loss.kind != LossConfig::Kind::kPpo ||
        c.loss.advantages != LossConfig::Advantages::kGae) {
      fail(fmt::format(
          "learner.shuffle = \"steps\": expected loss.kind = \"ppo\" and loss.advantages = "
          "\"gae\" (are {} and {}); V-trace is recomputed per minibatch over whole trajectories",
          quoted(to_string(c.loss.kind)), quoted(to_string(c.loss.advantages))));
    }
    if (c.model.core != ModelConfig::Core::kNone) {
      fail(fmt::format(
          "learner.shuffle = \"steps\": expected model.core = \"none\" (is {}); a recurrent "
          "core runs over whole trajectories",
          quoted(to_string(c.model.core))));
    }
    if (const int64_t steps = columns * c.actor.unroll_length; steps % c.learner.minibatches != 0) {
      fail(
          fmt::format("learner.minibatches = {}: expected a divisor of the batch's steps, "
                      "learner.batch_size × env.num_envs × actor.unroll_length = {} × {} × {} = {}",
                      c.learner.minibatches, c.learner.batch_size, c.env.num_envs,
                      c.actor.unroll_length, steps));
    }
  }
  if (c.loss.advantages == LossConfig::Advantages::kGae && c.loss.kind != LossConfig::Kind::kPpo) {
    fail(
        fmt::format("loss.advantages = \"gae\": expected loss.kind = \"ppo\" (is {}); the "
                    "IMPALA loss uses V-trace",
                    quoted(to_string(c.loss.kind))));
  }
  if (c.loss.value_clip > 0 && c.loss.kind != LossConfig::Kind::kPpo) {
    fail(fmt::format("loss.value_clip = {}: expected loss.kind = \"ppo\" (is {})",
                     c.loss.value_clip, quoted(to_string(c.loss.kind))));
  }
  if (c.server.tls_cert.empty() != c.server.tls_key.empty()) {
    fail("server.tls_cert and server.tls_key: expected both set or both empty");
  }
  if (!c.server.tls_client_ca.empty() && c.server.tls_cert.empty()) {
    fail("server.tls_client_ca: expected server.tls_cert and server.tls_key to be set too");
  }
  check_address("server.address", c.server.address);
  if (in_addr any{}; inet_pton(AF_INET, c.server.metrics_address.c_str(), &any) != 1) {
    fail(fmt::format(
        "server.metrics_address = {}: expected an IPv4 address (127.0.0.1, or 0.0.0.0 for every "
        "interface)",
        quoted(c.server.metrics_address)));
  }
  if (!is_loopback_address(c.server.address) && c.server.token_file.empty()) {
    fail(
        fmt::format("server.address = {}: a non-loopback address needs server.token_file set, "
                    "so no one on the network can steer the job with a token they can read",
                    quoted(c.server.address)));
  }
  bool name_ok = std::all_of(c.run.name.begin(), c.run.name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
  });
  if (!name_ok || c.run.name == "." || c.run.name == "..") {
    fail(fmt::format("run.name = {}: expected letters, digits, '-', '_' or '.'",
                     quoted(c.run.name)));
  }
  // It names the run directory: no longer than a file name may be (NAME_MAX).
  if (constexpr size_t kMaxName = 255; c.run.name.size() > kMaxName) {
    fail(fmt::format("run.name: {} characters, expected at most {} (it names the run directory)",
                     c.run.name.size(), kMaxName));
  }
  if (c.env.name.empty() && c.env.plugin.empty()) {
    fail("env.name = \"\": expected a built-in env name, or env.plugin set");
  }
  if (c.env.splits > 1) check_splits(c.env);
  check_distributed(c.distributed);
  if (c.run.deterministic) check_deterministic(c);
  if (c.learner.on_policy && !c.run.deterministic) {
    fail(
        "learner.on_policy = true: expected run.deterministic = true (actors wait for the policy "
        "of each batch in its fixed actor order)");
  }
  if (!c.remote.address.empty()) check_address("remote.address", c.remote.address);
  if (c.remote.credits >= c.learner.ring_slots) {
    fail(fmt::format("remote.credits = {}: expected fewer than learner.ring_slots = {}",
                     c.remote.credits, c.learner.ring_slots));
  }
}

}  // namespace pronghorn
