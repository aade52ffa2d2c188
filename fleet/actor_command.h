// The command lines of this node's child processes, each said once:
//   - an actor process: what the learner's and an actor-only node's
//     supervisors start (`pronghorn actor-process …`, parsed in
//     tools/cmd_train.cpp with the same flag names). The supervisor appends
//     `--actor-id i` for each actor it starts (fleet/supervisor.h).
//   - an evaluation process: what the learner's evaluator starts
//     (`pronghorn evaluation-process …`, learner/evaluator.h; parsed in
//     tools/cmd_eval.cpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pronghorn::fleet {

inline constexpr const char* kActorProcessCommand = "actor-process";
inline constexpr const char* kRingFlag = "--ring";
inline constexpr const char* kSlabFlag = "--slab";
inline constexpr const char* kConfigFlag = "--config";
inline constexpr const char* kParentFlag = "--learner-pid";
inline constexpr const char* kSeedRankFlag = "--rank";
inline constexpr const char* kActorIdFlag = "--actor-id";
inline constexpr const char* kLockstepFlag = "--lockstep-unrolls";
inline constexpr const char* kNiceFlag = "--nice";
inline constexpr const char* kEvaluationProcessCommand = "evaluation-process";
inline constexpr const char* kSocketFlag = "--socket";

// Where an actor process writes and what it runs.
struct ActorTarget {
  std::string ring;         // shm name of the ring it writes unrolls into
  std::string slab;         // shm name of the weight slab it reads
  std::string config_path;  // the run's resolved config.toml
  pid_t parent = 0;         // the actor exits when this process is gone
  // Seeds envs apart: a learner's rank (< 4096), or a node's own number.
  uint32_t seed_rank = 0;
  // run.deterministic: the unrolls each batch takes from every actor
  // (actor/actor.h); 0 = off.
  uint32_t lockstep_unrolls = 0;
  int nice = 0;  // its nice value (fleet/priority.h); 0 = left as it is
};

// The arguments after the program name, without `--actor-id`.
std::vector<std::string> actor_process_args(const ActorTarget& target);

// What an evaluation process evaluates and whom it answers.
struct EvaluationTarget {
  std::string config_path;  // the run's resolved config.toml
  std::string socket;       // the learner's local socket (fleet/local_socket.h)
  pid_t parent = 0;         // it stops when this process is gone
};

// The arguments after the program name.
std::vector<std::string> evaluation_process_args(const EvaluationTarget& target);

}  // namespace pronghorn::fleet
