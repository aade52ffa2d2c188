// The control plane's Status message (proto/pronghorn.proto), built in this
// one place from the run's plain statistics and the learner's live state, so
// a new metric touches RunStats, this file and the proto.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "buffer/ring.h"
#include "learner/data_parallel.h"
#include "learner/run_stats.h"
#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

// What the learner knows besides its statistics, at the moment of the status.
struct LiveState {
  std::string run_name, run_dir, env_name, config_digest;
  double uptime_s = 0;
  uint64_t policy_version = 0;
  uint32_t ring_slots = 0;
  buffer::RingCounters ring;
  int actors_alive = 0, actors_desired = 0;
  uint64_t actor_restarts = 0;
  bool stopping = false;
  // Several learners: this rank's place, and rank 0's rows of every rank.
  uint32_t rank = 0, world_size = 1;
  std::string node_name;
  std::vector<v1::RankStatus> ranks;
  // Actor-only nodes that joined, and where they join ("" = not served).
  std::vector<v1::RemoteNode> remote_nodes;
  std::string remote_address;
  uint64_t total_steps = 0;
  double target_return = 0;
  std::string state = "running", end_reason, health;  // Status fields 47–49
};

v1::Status make_status(const RunStats& stats, const LiveState& live);

// Rank 0 of several learners: every rank's row of its status, from the rows
// the step's all-reduce carried and each rank's node name and host.
std::vector<v1::RankStatus> make_rank_rows(const std::vector<RankRow>& rows,
                                           const std::vector<std::string>& nodes,
                                           const std::vector<std::string>& hosts);

}  // namespace pronghorn::learner
