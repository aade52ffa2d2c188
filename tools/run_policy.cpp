#include "tools/run_policy.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "envs/env.h"
#include "learner/checkpoint_model.h"

namespace pronghorn::cli {
namespace {

namespace fs = std::filesystem;

// The checkpoint file `path` names: itself, or a run directory's best, else newest.
std::string checkpoint_of(const std::string& path) {
  if (!fs::is_directory(path)) return path;
  const std::string folder = (fs::path(path) / "checkpoints").string();
  const std::string best = folder + "/" + learner::kBestCheckpointName;
  std::string why;
  if (fs::is_regular_file(best) && learner::read_checkpoint(best, &why)) return best;
  std::string newest;
  if (!learner::load_newest_checkpoint(folder, &newest)) {
    throw UsageError(
        fmt::format("{}: no valid checkpoint in {} (a run directory holds them in "
                    "checkpoints/)",
                    path, folder));
  }
  return newest;
}

}  // namespace

ModelOfConfig policy_for(const Config& config) {
  EnvConfig one_env = config.env;  // for the spec alone
  one_env.num_envs = 1;
  one_env.splits = 1;
  const EnvSpec spec = envs::make_env(one_env, 0)->spec();
  return {spec, PolicyNet(model_spec_for(spec, config.model))};
}

void load_parameters(PolicyNet& model, const learner::Checkpoint& ckpt, const std::string& file,
                     const std::string& config_path) {
  const std::string unfit = learner::parameters_unfit(ckpt, learner::parameter_layout(*model));
  PRONGHORN_CHECK(unfit.empty(), "checkpoint ", file, " does not fit the model of ", config_path,
                  ": ", unfit);
  model->read_flat(ckpt.parameters.data());
  // The statistics the parameters were trained under, frozen; a checkpoint
  // written before them holds none, and none are applied.
  if (!ckpt.observation_stats) {
    model->drop_observation_statistics();
    return;
  }
  PRONGHORN_CHECK(model->spec().normalize_observations, "checkpoint ", file,
                  " holds observation statistics, but ", config_path,
                  " does not set model.normalize_observations = true");
  PRONGHORN_CHECK(ckpt.observation_stats->size() == model->observation_size(), "checkpoint ", file,
                  " holds observation statistics of ", ckpt.observation_stats->size(),
                  " values, the env's observations have ", model->observation_size());
  model->set_observation_statistics(*ckpt.observation_stats);
}

RunPolicy load_run_policy(const std::string& path, const char* command) {
  if (std::error_code ec; !fs::exists(path, ec)) {  // a path the user named: usage
    throw UsageError(
        fmt::format("{}: {}: no such run directory or checkpoint file", command, path));
  }
  RunPolicy out;
  out.checkpoint = checkpoint_of(path);
  // The run's config.toml says what the weights are: a checkpoint is read
  // where its run keeps it.
  const fs::path folder = fs::absolute(out.checkpoint).parent_path();
  const fs::path run_dir = folder.parent_path();
  out.config_path = (run_dir / "config.toml").string();
  if (folder.filename() != "checkpoints" || !fs::is_regular_file(out.config_path)) {
    throw UsageError(fmt::format(
        "{}: {}: a checkpoint is read where its run keeps it, in RUN/checkpoints/ beside "
        "RUN/config.toml (this one lies in {})",
        command, out.checkpoint, folder.string()));
  }
  out.ckpt = learner::load_checkpoint(out.checkpoint);
  out.config = load_config(out.config_path, {});
  auto [spec, model] = policy_for(out.config);
  out.spec = spec;
  out.model = model;
  load_parameters(out.model, out.ckpt, out.checkpoint, out.config_path);
  return out;
}

}  // namespace pronghorn::cli
