#include "tools/gateway.h"

#include <algorithm>
#include <filesystem>

#include "buffer/unroll_spec.h"
#include "core/files.h"
#include "core/token.h"
#include "remote/actor_gateway.h"
#include "remote/wire.h"

namespace pronghorn::cli {
namespace {

// The job's id: the same across --resume, so a node can tell its learner
// came back from another job on the same address.
std::string job_id(const std::string& run_dir) {
  const std::string path = run_dir + "/job.id";
  if (std::filesystem::exists(path)) {
    std::string id = read_file(path);
    while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.pop_back();
    if (!id.empty()) return id;
  }
  std::string id = generate_token().substr(0, 16);
  write_file_atomically(path, id + "\n");
  return id;
}

}  // namespace

learner::RemoteActorsFactory gateway_factory(const Config& config, const EnvSpec& env,
                                             const std::string& run_dir, const std::string& token) {
  if (config.remote.address.empty()) return {};
  remote::GatewayOptions o;
  o.address = config.remote.address;
  o.tls = config.server;
  o.token = token;
  o.job_id = job_id(run_dir);
  o.incarnation = generate_token().substr(0, 16);
  o.version = PRONGHORN_VERSION;
  o.spec_hash = buffer::spec_hash(buffer::unroll_spec_for(env, config));
  o.env_spaces = env.describe();
  o.env_packages = env.packages;
  if (!config.env.plugin.empty()) o.plugin = remote::plugin_identity(config.env.plugin);
  o.credits = static_cast<uint32_t>(config.remote.credits);
  // Nodes never hold the slots the learner's batch and its own actors need.
  o.max_held_slots = static_cast<uint32_t>(
      std::max<int64_t>(1, config.learner.ring_slots - config.learner.batch_size - 1));
  o.default_processes = 1;
  return [o, run_dir](buffer::Ring& ring, const buffer::WeightSlab& slab,
                      const std::string& config_toml) -> std::unique_ptr<learner::RemoteActors> {
    remote::GatewayOptions options = o;
    options.config_toml = config_toml;
    auto gateway = std::make_unique<remote::ActorGateway>(std::move(options), ring, slab);
    write_file_atomically(run_dir + "/remote.address", gateway->address() + "\n");
    return gateway;
  };
}

}  // namespace pronghorn::cli
