// The learner's side of actor-only nodes (proto/remote.proto, docs/architecture.md
// §2): a gRPC server on remote.address, apart from the control plane.
//
//   Join            checks version and plugin; the job's config, a session
//   StreamUnrolls   each message: a held ring slot ← the slot's bytes, commit
//   StreamWeights   the slab's newest version, chunked, then each newer one
//
// Credits: a node may send one unroll per credit. Each credit is a ring slot
// the gateway has claimed for that node (WRITING, owned by the learner) — so
// an unroll that arrives always has a slot, memory stays bounded by the
// ring, and when the learner falls behind (no FREE slot) credits stop and
// the node's own ring fills and throttles its actors, exactly as the ring
// throttles local actors. At most remote.credits slots per node; a session's
// unused slots go back FREE when it ends.
//
// Weights: one thread reads each new slab version once (at most every
// kWeightsIntervalMs), checksums it and serialises its chunks once into
// byte buffers that every node's stream shares; a stream between versions
// takes the newest, so a slow node skips versions.
//
// Every call runs on gRPC's callback threads and none waits in them.
// Threads: constructed and destroyed by the learner's loop; nodes() and
// scale() from that loop; the rest is gRPC's threads and two of its own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "core/config.h"
#include "learner/remote_actors.h"
#include "proto/remote.pb.h"

namespace pronghorn::remote {

struct GatewayOptions {
  std::string address;      // remote.address
  ServerConfig tls;         // its tls_* serve this address too
  std::string token;        // the job's
  std::string config_toml;  // the job's resolved config, handed to every node
  std::string job_id, incarnation;
  std::string version;     // this build's (PRONGHORN_VERSION): a node must run the same
  uint64_t spec_hash = 0;  // the ring's unroll spec (buffer/unroll_spec.h spec_hash)
  std::optional<v1::PluginIdentity> plugin;         // the job's env plugin, when it has one
  std::string env_spaces;                           // EnvSpec::describe() of the learner's env
  std::map<std::string, std::string> env_packages;  // EnvSpec::packages
  uint32_t credits = 4;                             // remote.credits
  uint32_t max_held_slots = 0;                      // by every node together; 0 = the ring's slots
  int default_processes = 1;                        // for a node that asks for none
};

class ActorGateway final : public learner::RemoteActors {
 public:
  static constexpr int kWeightsIntervalMs = 10;

  // Listens on options.address; throws Error naming it when it cannot.
  ActorGateway(GatewayOptions options, buffer::Ring& ring, const buffer::WeightSlab& slab);
  // Ends every stream (nodes see UNAVAILABLE and reconnect, unless end_job()
  // told them first), gives held slots back, stops serving.
  ~ActorGateway() override;

  int port() const;

  std::vector<v1::RemoteNode> nodes() override;
  bool scale(const std::string& node, int processes) override;
  void end_job() override;
  uint64_t committed() const override;
  std::string address() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pronghorn::remote
