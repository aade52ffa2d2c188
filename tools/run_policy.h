// A run's policy as the CLI loads it (`pronghorn eval`, `pronghorn export`,
// the learner's evaluation process): the checkpoint a path names, the run's
// config.toml beside it, the env's spec, and the model with the checkpoint's
// weights when they fit it.
#pragma once

#include <string>

#include "core/config.h"
#include "core/env_spec.h"
#include "learner/checkpoint.h"
#include "model/policy.h"

namespace pronghorn::cli {

struct ModelOfConfig {
  EnvSpec spec;
  PolicyNet model;
};

// The policy `config` makes (its weights as initialised), for the spec of
// one env of config.env.
ModelOfConfig policy_for(const Config& config);

// `model` with the parameters of `ckpt` (read from `file`), when they fit;
// Error naming the first parameter that does not.
void load_parameters(PolicyNet& model, const learner::Checkpoint& ckpt, const std::string& file,
                     const std::string& config_path);

struct RunPolicy {
  std::string checkpoint;  // the file read
  learner::Checkpoint ckpt;
  std::string config_path;  // the run's config.toml
  Config config;
  EnvSpec spec;
  PolicyNet model{nullptr};
};

// The policy of `path`: a .ckpt file in a run's checkpoints/, or a run
// directory, which stands for its best.ckpt (the run's best evaluation),
// else its newest valid checkpoint. UsageError when `path` is neither
// (`command` names the subcommand in the message).
RunPolicy load_run_policy(const std::string& path, const char* command);

}  // namespace pronghorn::cli
