// What a job's config must satisfy beyond validate() (core/config.h), which
// needs the envs and the model: the env it names exists (a built-in, or one
// the plugin offers) and the model fits that env's observations. One
// function, so `pronghorn config` refuses exactly what `pronghorn train`
// would refuse before any work starts.
// Not checked here, as they depend on the machine the job runs on rather than
// on the config: learner.device = "cuda" without a GPU, the token and TLS
// files, room in /dev/shm.
#pragma once

#include "core/config.h"
#include "envs/env.h"

namespace pronghorn::actor {

// The spec of the env `config` names (made once with one env, as an actor
// would make it). Throws UsageError naming the key that does not fit, or the
// plugin's Error when the plugin cannot make the env.
envs::EnvSpec check_job_config(const Config& config);

}  // namespace pronghorn::actor
