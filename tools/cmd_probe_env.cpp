// `pronghorn probe-env`: the child process that tries an env plugin for
// envs::probe_env_spec (envs/plugin_probe.h), started by this same binary so
// that a plugin that crashes or hangs takes only this process with it. Not
// for users: it writes its report to fd 3.
#include <memory>

#include "envs/plugin_probe.h"
#include "tools/cli.h"

namespace pronghorn::cli {

Command add_probe_env_command(CLI::App& app) {
  auto request = std::make_shared<envs::ProbeRequest>();
  CLI::App* command = app.add_subcommand("probe-env", "Try an env plugin, started by pronghorn");
  command->group("");  // internal: not listed in --help
  command->add_option("--plugin", request->plugin, "the plugin library")->required();
  command->add_option("--env", request->env_name, "the env to try");
  command->add_option("--max-episode-steps", request->max_episode_steps, "0: the env's own");
  command->add_flag("--list", request->list, "only load it and report every spec");
  return {command, [request] { envs::serve_probe(*request, envs::kProbeReportFd); }};
}

}  // namespace pronghorn::cli
