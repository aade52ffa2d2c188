// `pronghorn config`: validate a config (file plus --set overrides) and print
// it resolved, with every key, its value and a line of help. Exit 2 with one
// line naming the key when it is not valid, or when `train` would refuse it
// (actor/job_check.h: an env that does not exist, a model that does not fit;
// fleet/actor_capacity.h: more actors than this machine holds).
#include <iostream>
#include <memory>

#include "actor/job_check.h"
#include "fleet/actor_capacity.h"
#include "tools/cli.h"

namespace pronghorn::cli {

void add_config_options(CLI::App* command, ConfigArgs& args) {
  command->add_option("-c,--config", args.file, "TOML config file (default: built-in defaults)")
      ->check(CLI::ExistingFile);
  command->add_option("--set", args.overrides, "override one key: section.key=value (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
}

Command add_config_command(CLI::App& app) {
  auto args = std::make_shared<ConfigArgs>();
  CLI::App* command = app.add_subcommand(
      "config", "Validate a config and print it resolved, as TOML with every key");
  add_config_options(command, *args);
  return {command, [args] {
            const Config config = args->load();
            actor::check_job_config(config);  // what `train` refuses, refused here too
            fleet::check_actor_count(config.actor);
            std::cout << to_toml(config);
          }};
}

}  // namespace pronghorn::cli
