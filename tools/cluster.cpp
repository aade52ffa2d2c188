#include "tools/cluster.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <toml++/toml.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>

#include "buffer/unroll_spec.h"
#include "core/config_schema.h"
#include "core/error.h"
#include "distributed/gloo_collective.h"
#include "distributed/nccl_api.h"
#include "distributed/nccl_collective.h"
#include "distributed/route.h"
#include "model/policy.h"
#include "model/tensor_runtime.h"

namespace pronghorn::cli {
namespace {

using Ms = std::chrono::milliseconds;

Ms milliseconds(double seconds) { return Ms(static_cast<int64_t>(seconds * 1000)); }

// "auto" resolves on each rank to what its learner device needs. NCCL sums
// CUDA memory only: refused here, before any rank waits for the others, when
// the learner will not be on a GPU.
std::string resolve_backend(const Config& c) {
  using B = DistributedConfig::Backend;
  const bool cuda = resolve_learner_device(c.learner.device) == LearnerConfig::Device::kCuda;
  if (c.distributed.backend == B::kGloo) return "gloo";
  if (c.distributed.backend == B::kNccl && !cuda) {
    // learner.device is decided by now (tools/cmd_train.cpp's plan_job):
    // "cpu" was either written or what "auto" found.
    throw UsageError(
        "distributed.backend = \"nccl\" needs the learner on a GPU, and this one is on the CPU "
        "(learner.device = \"cpu\", or \"auto\" with no CUDA device usable by LibTorch here: a "
        "CPU build of LibTorch, or no GPU visible); use \"gloo\" or \"auto\"");
  }
  return cuda ? "nccl" : "gloo";
}

bool is_loopback_ip(const std::string& ip) { return is_loopback_address(ip + ":0"); }

// The address the collective binds and the others dial: the one routing
// toward rank 0, or distributed.interface's. Where rank 0's name resolves to
// loopback on its own host (Debian maps the hostname to 127.0.1.1), that
// route is loopback too, and ranks elsewhere could never connect: then the
// default route's source address, or a refusal naming the key to set.
std::string bind_address(const DistributedConfig& d, const distributed::Placement& p) {
  if (!d.interface.empty()) return distributed::address_of_interface(d.interface);
  std::string toward = distributed::local_address_toward(p.host, p.port);
  if (!is_loopback_ip(toward) || is_loopback_address(fmt::format("{}:{}", p.host, p.port))) {
    return toward;  // a real route, or a job that is all on this machine by its own choice
  }
  std::string outward;
  try {
    outward = distributed::local_address_toward("192.0.2.1", 9);  // TEST-NET-1: only the route
  } catch (const UsageError&) {
  }
  if (outward.empty() || is_loopback_ip(outward)) {
    throw UsageError(fmt::format(
        "distributed: rank 0's address {} is loopback ({}) on this host and there is no other "
        "route; set distributed.interface, or a rendezvous host the other ranks reach",
        p.host, toward));
  }
  spdlog::info("rank 0's address {} is loopback here ({}); the collective binds {}", p.host, toward,
               outward);
  return outward;
}

// The host at which rank 0's users reach this rank's control plane: its
// server.address host; this rank's own address when that is a wildcard; ""
// when it is loopback on a node other than rank 0's (nobody there can reach it).
std::string control_host(const std::string& server_address, const std::string& bind) {
  std::string host = server_address.substr(0, server_address.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]" || host == "::") return bind;
  if (is_loopback_address(server_address) && !is_loopback_ip(bind)) return "";
  return host;
}

// This rank's index among the ranks of its node, as launchers set it
// (torchrun, Slurm, Open MPI); 0 where none does.
int local_rank() {
  for (const char* name : {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == 0) continue;
    try {
      return std::max(0, std::stoi(value));
    } catch (const std::exception&) {
      throw UsageError(fmt::format("{}={}: not a local rank", name, value));
    }
  }
  return 0;
}

}  // namespace

distributed::Facts job_facts(const Config& config, const EnvSpec& env, int world_size,
                             const std::string& backend) {
  distributed::Facts facts;
  const toml::table table = toml::parse(to_toml(config));
  for (const auto& [section, keys] : table) {
    for (const auto& [key, value] : *keys.as_table()) {
      const std::string name = fmt::format("{}.{}", section.str(), key.str());
      if (config_schema::may_differ_per_rank(name)) continue;  // the table's Ranks column
      std::ostringstream text;
      text << toml::toml_formatter(value);  // as written: "[64, 64]", "\"cartpole\""
      facts.emplace_back(name, text.str());
    }
  }
  const buffer::UnrollSpec spec = buffer::unroll_spec_for(env, config);
  facts.emplace_back("unroll spec", fmt::format("{:016x}", buffer::spec_hash(spec)));
  facts.emplace_back("env", env.describe());
  for (const auto& [name, version] : env.packages) {  // a Python env's (EnvSpec::packages)
    facts.emplace_back("env package " + name, public_version(version));
  }
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
  const std::string bind = bind_address(d, placement);
  m.rendezvous->publish("node", placement.node_name);
  m.rendezvous->publish("host", control_host(config.server.address, bind));
  m.nodes.assign(placement.world_size, "");
  m.hosts.assign(placement.world_size, "");
  for (int r = 0; r < placement.world_size; ++r) {
    if (r != placement.rank && placement.rank != 0) continue;
    m.nodes[r] = m.rendezvous->read(r, "node");
    m.hosts[r] = m.rendezvous->read(r, "host");
  }
  if (backend == "nccl") {
#ifdef PRONGHORN_WITH_CUDA
    // Before the learner's model is made: "cuda" then means this rank's GPU.
    const int gpu = distributed::use_local_gpu(local_rank());
    spdlog::info("collective: NCCL on GPU {}", gpu);
#endif
    distributed::Rendezvous* r = m.rendezvous.get();
    m.collective = distributed::make_nccl_collective(placement.rank, placement.world_size, *r,
                                                     o.timeout, [r] { return r->lost_peers(); });
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
