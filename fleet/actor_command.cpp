#include "fleet/actor_command.h"

namespace pronghorn::fleet {

std::vector<std::string> actor_process_args(const ActorTarget& t) {
  std::vector<std::string> args{kActorProcessCommand,
                                kRingFlag,
                                t.ring,
                                kSlabFlag,
                                t.slab,
                                kConfigFlag,
                                t.config_path,
                                kParentFlag,
                                std::to_string(t.parent),
                                kSeedRankFlag,
                                std::to_string(t.seed_rank)};
  if (t.lockstep_unrolls > 0) {
    args.insert(args.end(), {kLockstepFlag, std::to_string(t.lockstep_unrolls)});
  }
  if (t.nice > 0) args.insert(args.end(), {kNiceFlag, std::to_string(t.nice)});
  return args;
}

std::vector<std::string> evaluation_process_args(const EvaluationTarget& t) {
  return {kEvaluationProcessCommand, kConfigFlag, t.config_path, kSocketFlag, t.socket, kParentFlag,
          std::to_string(t.parent)};
}

}  // namespace pronghorn::fleet
