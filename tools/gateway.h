// `pronghorn train`'s side of actor-only nodes: the learner's
// RemoteActorsFactory that serves the actor gateway (remote/actor_gateway.h)
// on remote.address, when it is set.
#pragma once

#include <string>

#include "core/config.h"
#include "core/env_spec.h"
#include "learner/remote_actors.h"

namespace pronghorn::cli {

// The gateway of the learner running in `run_dir`, for the job's `token`.
// It writes the address it listens on (the port bound) to
// <run_dir>/remote.address, and keeps the job's id in <run_dir>/job.id,
// made at the first start and the same at every --resume.
learner::RemoteActorsFactory gateway_factory(const Config& config, const EnvSpec& env,
                                             const std::string& run_dir, const std::string& token);

}  // namespace pronghorn::cli
