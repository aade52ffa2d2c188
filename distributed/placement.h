// Where this learner stands in a group of learners training one model: its
// rank, the world size, rank 0's store address and this node's name.
//
// Each value comes from the first source that has it (issue 16), and
// Placement::source says which, for the start-up log line:
//   1. the config ([distributed] world_size, rank, rendezvous), key by key;
//   2. the first launcher family present in the environment, chosen by its
//      rank variable, for what the config leaves unset:
//      - torchrun / Kubeflow PyTorchJob: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//      - Slurm: SLURM_PROCID, SLURM_NTASKS, the first host of SLURM_JOB_NODELIST
//        (MASTER_ADDR when set), port MASTER_PORT when set, else
//        kSlurmPortBase + SLURM_JOB_ID % kSlurmPortSpan, so every task of a
//        job derives the same port and two jobs sharing rank 0's node rarely
//        meet on one;
//      - Kubernetes Indexed Job / JobSet: JOB_COMPLETION_INDEX is the rank;
//        world size and address from WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//      - none of them: WORLD_SIZE, MASTER_ADDR, MASTER_PORT alone still count
//        (a config that sets the rank, say);
//   3. nothing anywhere: world size 1, rank 0, today's single learner.
// distributed.world_size = 1 in the config is a single learner whatever the
// environment holds (a sweep run as an Indexed Job, say).
//
// An empty environment variable counts as unset. The address is needed, and
// read from the environment, only when the world size is above 1. Every
// refusal is a UsageError (exit 2) naming the key or variable and its value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"

namespace pronghorn::distributed {

// The Slurm rendezvous port when MASTER_PORT is unset: base + job id % span.
inline constexpr int kSlurmPortBase = 20000;
inline constexpr int kSlurmPortSpan = 10000;

struct Placement {
  int rank = 0;
  int world_size = 1;
  // Rank 0's store; host without IPv6 brackets ("::1"). Empty host and port
  // 0 for a single learner with no rendezvous set. Port 0 on rank 0: pick a
  // free one.
  std::string host;
  uint16_t port = 0;
  // Where rank, world size and address came from, e.g. "config",
  // "Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST, SLURM_JOB_ID)",
  // "config (distributed.rank) and torchrun/Kubeflow (WORLD_SIZE, ...)",
  // "single learner".
  std::string source;
  std::string node_name;         // --name, else SLURMD_NODENAME, else the hostname
  std::string node_name_source;  // "--name", "SLURMD_NODENAME" or "hostname"
};

// An environment variable's value, or nullopt when it is unset.
using GetEnv = std::function<std::optional<std::string>(const std::string& name)>;

// The placement `config` and the environment (read through `getenv`) give;
// `name_flag` is the command line's --name ("" when not given). Throws
// UsageError naming the key or variable when a value is malformed or out of
// range, when rank >= world size, when a world size above 1 has no address,
// and when a rank other than 0 is given port 0.
Placement resolve_placement(const DistributedConfig& config, const GetEnv& getenv,
                            const std::string& name_flag);

// Same, reading this process's environment.
Placement resolve_placement(const DistributedConfig& config, const std::string& name_flag);

// getenv(3) as a GetEnv.
std::optional<std::string> process_environment(const std::string& name);

// One line for the start-up log: "rank 1 of 2, rank 0 at n1:29500 (from
// Slurm (...)), node n2 (SLURMD_NODENAME)".
std::string describe(const Placement& placement);

// The hosts of a Slurm hostlist ("n[1-2,5]", "gpu[003-004]", "a,b",
// "rack1-n[01-02]", "r[1-2]n[1-2]"), in Slurm's order, zero padding kept, at
// most `limit` of them. Throws UsageError naming `variable` and the text when
// it is malformed.
std::vector<std::string> expand_hostlist(std::string_view hostlist, size_t limit,
                                         std::string_view variable = "SLURM_JOB_NODELIST");

}  // namespace pronghorn::distributed
