// `pronghorn train` as one rank of several learners (docs/architecture.md §2):
// the rendezvous with rank 0, the start-up agreement, and this rank's side of
// the job's Collective, made before the learner that uses them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "distributed/collective.h"
#include "distributed/placement.h"
#include "distributed/rendezvous.h"

namespace pronghorn::cli {

struct ClusterMember {
  distributed::Placement placement;
  std::unique_ptr<distributed::Rendezvous> rendezvous;
  std::unique_ptr<distributed::Collective> collective;  // uses the rendezvous: declared after
  // Every rank's node name and the host of its control plane ("" where rank
  // 0's users cannot reach it), by rank (on rank 0; the others know only
  // their own).
  std::vector<std::string> nodes, hosts;
};

// What every rank must have equal, as (name, value) pairs: every config key
// but those that may differ per rank or change while the job runs, then the
// unroll spec, the model's size, the backend and the version.
distributed::Facts job_facts(const Config& config, const EnvSpec& env, int world_size,
                             const std::string& backend);

// Meets the other ranks, proves the token, checks the facts and connects the
// collective. On rank 0, `announce` gets the store's "host:port" once it
// listens (written to <run>/rendezvous.address). Throws UsageError (exit 2)
// for a mismatch or a refused token, PeerLost (exit 75) when a rank does not
// come within distributed.rendezvous_timeout_s.
ClusterMember join_cluster(const Config& config, const EnvSpec& env,
                           const distributed::Placement& placement,
                           std::function<std::string()> token,
                           const std::function<void(const std::string&)>& announce);

}  // namespace pronghorn::cli
