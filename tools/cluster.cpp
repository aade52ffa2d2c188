#include "tools/cluster.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <toml++/toml.h>
#include <torch/torch.h>

#include <set>

#include "buffer/unroll_spec.h"
#include "core/error.h"
#include "distributed/gloo_collective.h"
#include "distributed/nccl_collective.h"
#include "distributed/route.h"
#include "model/policy.h"

namespace pronghorn::cli {
namespace {

using Ms = std::chrono::milliseconds;

Ms milliseconds(double seconds) { return Ms(static_cast<int64_t>(seconds * 1000)); }

// Keys that may differ per rank or change while the job runs (issue 16):
// whole sections end in '.'.
bool may_differ(const std::string& key) {
  static const std::set<std::string> keys = {"distributed.rank",
                                             "distributed.world_size",
                                             "distributed.rendezvous",
                                             "distributed.interface",
                                             "distributed.backend",
                                             "actor.count",
                                             "learner.threads",
                                             "run.dir",
                                             "run.seed"};
  return keys.contains(key) || key.starts_with("server.") || key.starts_with("remote.");
}

// "auto" resolves on each rank to what its learner device needs. NCCL sums
// CUDA memory only: refused here, before any rank waits for the others, when
// the learner will not be on a GPU.
std::string resolve_backend(const Config& c) {
  using B = DistributedConfig::Backend;
  const bool cuda = c.learner.device != LearnerConfig::Device::kCpu && torch::cuda::is_available();
  if (c.distributed.backend == B::kGloo) return "gloo";
  if (c.distributed.backend == B::kNccl && !cuda) {
    throw UsageError(
        c.learner.device == LearnerConfig::Device::kCpu
            ? "distributed.backend = \"nccl\" needs the learner on a GPU, and "
              "learner.device = \"cpu\"; use \"gloo\" or \"auto\""
            : "distributed.backend = \"nccl\": no CUDA device usable by LibTorch here "
              "(a CPU build of LibTorch, or no GPU visible); use \"gloo\" or \"auto\"");
  }
  return cuda ? "nccl" : "gloo";
}

}  // namespace

distributed::Facts job_facts(const Config& config, const EnvSpec& env, int world_size,
                             const std::string& backend) {
  distributed::Facts facts;
  const toml::table table = toml::parse(to_toml(config));
  for (const auto& [section, keys] : table) {
    for (const auto& [key, value] : *keys.as_table()) {
      const std::string name = fmt::format("{}.{}", section.str(), key.str());
      if (may_differ(name)) continue;
      std::ostringstream text;
      text << toml::toml_formatter(value);  // as written: "[64, 64]", "\"cartpole\""
      facts.emplace_back(name, text.str());
    }
  }
  const buffer::UnrollSpec spec =
      buffer::unroll_spec_for(env, config.actor.unroll_length, config.env.num_envs);
  facts.emplace_back("unroll spec", fmt::format("{:016x}", buffer::spec_hash(spec)));
  PolicyNet model(model_spec_for(env, config.model));
  facts.emplace_back("parameter count", std::to_string(model->parameter_count()));
  facts.emplace_back("world size", std::to_string(world_size));
  facts.emplace_back("collective backend", backend);
  facts.emplace_back("pronghorn version", PRONGHORN_VERSION);
  return facts;
}

ClusterMember join_cluster(const Config& config, const EnvSpec& env,
                           const distributed::Placement& placement,
                           std::function<std::string()> token,
                           const std::function<void(const std::string&)>& announce) {
  const DistributedConfig& d = config.distributed;
  const std::string backend = resolve_backend(config);
  ClusterMember m;
  m.placement = placement;
  distributed::RendezvousOptions o;
  o.rank = placement.rank;
  o.world_size = placement.world_size;
  o.host = placement.host;
  o.port = placement.port;
  o.run_name = config.run.name;
  o.token = std::move(token);
  o.rendezvous_timeout = milliseconds(d.rendezvous_timeout_s);
  o.timeout = milliseconds(d.timeout_s);
  o.on_listening = [&](int port) { announce(fmt::format("{}:{}", placement.host, port)); };
  spdlog::info("{}: waiting up to {:.0f} s for the other ranks", distributed::describe(placement),
               d.rendezvous_timeout_s);
  m.rendezvous = std::make_unique<distributed::Rendezvous>(o);
  m.rendezvous->agree(job_facts(config, env, placement.world_size, backend));
  const std::string bind = d.interface.empty()
                               ? distributed::local_address_toward(placement.host, placement.port)
                               : distributed::address_of_interface(d.interface);
  m.rendezvous->publish("node", placement.node_name);
  m.rendezvous->publish("host", bind);
  m.nodes.assign(placement.world_size, "");
  m.hosts.assign(placement.world_size, "");
  for (int r = 0; r < placement.world_size; ++r) {
    if (r != placement.rank && placement.rank != 0) continue;
    m.nodes[r] = m.rendezvous->read(r, "node");
    m.hosts[r] = m.rendezvous->read(r, "host");
  }
  if (backend == "nccl") {
    m.collective = distributed::make_nccl_collective(placement.rank, placement.world_size,
                                                     *m.rendezvous, o.timeout);
  } else {
    distributed::Rendezvous* r = m.rendezvous.get();
    m.collective = std::make_unique<distributed::GlooCollective>(
        r->prefixed("gloo"),
        distributed::GlooOptions{.rank = placement.rank,
                                 .world_size = placement.world_size,
                                 .bind_address = bind,
                                 .timeout = o.timeout,
                                 .lost_peers = [r] { return r->lost_peers(); }});
    spdlog::info("collective: Gloo on {}", bind);
  }
  spdlog::info("rank {} of {} joined run {} (incarnation {}), backend {}", placement.rank,
               placement.world_size, config.run.name, m.rendezvous->incarnation(), backend);
  return m;
}

}  // namespace pronghorn::cli
