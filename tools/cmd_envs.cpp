// `pronghorn envs`: lists the built-in envs (and a plugin's) with their
// observation and action spaces, says how to name a Python env, and shows
// one's spaces when asked.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "core/error.h"
#include "envs/env.h"
#include "envs/plugin_probe.h"
#include "envs/python_env.h"
#include "tools/cli.h"

namespace pronghorn::cli {

namespace {

struct EnvsArgs {
  std::string plugin;
  std::string python_env;  // empty: none asked for
  std::string python = EnvConfig{}.python;
};

}  // namespace

Command add_envs_command(CLI::App& app) {
  auto args = std::make_shared<EnvsArgs>();
  CLI::App* command = app.add_subcommand("envs", "List the envs with their spaces");
  command->add_option("--plugin", args->plugin, "also list the envs of this env plugin (.so)");
  command->add_option("--python-env", args->python_env,
                      "also show this Python env's spaces: \"gymnasium:<id>\" or "
                      "\"python:<module>:<callable>\"");
  command
      ->add_option("--python", args->python,
                   "the interpreter of --python-env (a venv's python brings its packages)")
      ->capture_default_str();
  return {
      command, [args] {
        for (const envs::EnvSpec& spec : envs::builtin_env_specs()) {
          std::cout << fmt::format("{:<10} {}\n", spec.name, spec.describe());
        }
        if (!args->plugin.empty()) {
          // Loaded in a child process: a plugin that crashes takes only that with it.
          for (const envs::EnvSpec& spec : envs::probe_plugin_specs(args->plugin)) {
            std::cout << fmt::format("{:<10} {} (from {})\n", spec.name, spec.describe(),
                                     args->plugin);
          }
        }
        if (!args->python_env.empty()) {
          EnvConfig config;
          config.name = args->python_env;
          config.python = args->python;
          if (!is_python_env(config)) {
            throw UsageError(fmt::format(
                "--python-env {}: expected \"gymnasium:<id>\" or \"python:<module>:<callable>\"",
                config.name));
          }
          const EnvSpec spec =
              envs::probe_python_env(config, envs::ProbeCommand::default_probe_deadline());
          std::cout << fmt::format("{} {} (in {})\n", spec.name, spec.describe(), config.python);
          return;
        }
        std::cout << "\nPython envs (docs/envs.md): env.name = \"gymnasium:<id>\" (any registered "
                     "Gymnasium id) or \"python:<module>:<callable>\" (yours), [env.options] "
                     "as keyword arguments, env.python = the interpreter with their packages.\n"
                     "  pronghorn envs --python-env gymnasium:LunarLander-v3 --python "
                     "VENV/bin/python\n";
      }};
}

}  // namespace pronghorn::cli
