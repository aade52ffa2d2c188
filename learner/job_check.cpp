#include "learner/job_check.h"

#include "core/error.h"
#include "envs/plugin_probe.h"
#include "learner/actor_capacity.h"
#include "model/policy.h"

namespace pronghorn::learner {

envs::EnvSpec check_job_config(const Config& config) {
  // UsageError for an unknown env.name; a plugin is tried in a child process.
  envs::EnvSpec spec = envs::probe_env_spec(config.env);
  try {
    model_spec_for(spec, config.model);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a model that does not fit the env is a config mismatch
    throw UsageError(e.what());
  }
  return spec;
}

void check_job_machine(const Config& config) {
  if (config.actor.count) initial_actor_count(config.actor);  // "auto" always fits
}

}  // namespace pronghorn::learner
