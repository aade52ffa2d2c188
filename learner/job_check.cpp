#include "learner/job_check.h"

#include "core/error.h"
#include "model/policy.h"

namespace pronghorn::learner {

envs::EnvSpec check_job_config(const Config& config) {
  EnvConfig one = config.env;
  one.num_envs = 1;
  envs::EnvSpec spec = envs::make_env(one, 0)->spec();  // UsageError for an unknown env.name
  try {
    model_spec_for(spec, config.model);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {  // a model that does not fit the env is a config mismatch
    throw UsageError(e.what());
  }
  return spec;
}

}  // namespace pronghorn::learner
