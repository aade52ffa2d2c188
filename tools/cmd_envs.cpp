// `pronghorn envs`: lists the built-in envs (and a plugin's) with their
// observation and action spaces.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "envs/env.h"
#include "envs/plugin_probe.h"
#include "tools/cli.h"

namespace pronghorn::cli {

Command add_envs_command(CLI::App& app) {
  auto plugin = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand("envs", "List the envs with their spaces");
  command->add_option("--plugin", *plugin, "also list the envs of this env plugin (.so)");
  return {command, [plugin] {
            for (const envs::EnvSpec& spec : envs::builtin_env_specs()) {
              std::cout << fmt::format("{:<10} {}\n", spec.name, spec.describe());
            }
            if (plugin->empty()) return;
            // Loaded in a child process: a plugin that crashes takes only that with it.
            for (const envs::EnvSpec& spec : envs::probe_plugin_specs(*plugin)) {
              std::cout << fmt::format("{:<10} {} (from {})\n", spec.name, spec.describe(),
                                       *plugin);
            }
          }};
}

}  // namespace pronghorn::cli
