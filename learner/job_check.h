// What a job's config must satisfy beyond validate() (core/config.h), which
// needs the envs and the model: the env it names exists (a built-in, or one
// the plugin offers) and the model fits that env's observations. One
// function, so `pronghorn config` refuses exactly what `pronghorn train`
// would refuse before any work starts.
// What depends on the machine the job runs on rather than on the config is
// check_job_machine's; not checked anywhere before the job starts:
// learner.device = "cuda" without a GPU, the token and TLS files, room in
// /dev/shm.
#pragma once

#include "core/config.h"
#include "envs/env.h"

namespace pronghorn::learner {

// The spec of the env `config` names (made once with one env, as an actor
// would make it). Throws UsageError naming the key that does not fit, or the
// plugin's Error when the plugin cannot make the env.
envs::EnvSpec check_job_config(const Config& config);

// What `train` refuses on this machine before any work, so that `pronghorn
// config` refuses it here too: an actor.count over what this node holds
// (learner/actor_capacity.h). Throws UsageError naming the key. Not for an
// actor-only node, whose actors are its own --processes.
void check_job_machine(const Config& config);

}  // namespace pronghorn::learner
