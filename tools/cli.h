// The `pronghorn` command's subcommands. Each add_*_command registers one
// subcommand with its options and returns what to run once the command line
// has parsed; main only wires them. `run` throws pronghorn::UsageError (exit
// 2) or Error (exit 1).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"

namespace pronghorn::cli {

// The options every config-taking subcommand shares: -c/--config FILE and
// repeated --set section.key=value.
struct ConfigArgs {
  std::string file;
  std::vector<std::string> overrides;

  Config load() const { return load_config(file, overrides); }
};
void add_config_options(CLI::App* command, ConfigArgs& args);

struct Command {
  CLI::App* parsed;           // the subcommand, to ask whether it was given
  std::function<void()> run;  // does its work, after logging is set up
  // It starts actor processes: main forks them a zygote first (fleet/zygote.h).
  bool starts_actors = false;
};

Command add_config_command(CLI::App& app);
Command add_envs_command(CLI::App& app);
Command add_train_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_actor_command(CLI::App& app);               // an actor-only node (cmd_actor.cpp)
Command add_actor_process_command(CLI::App& app);       // one actor process (hidden)
Command add_evaluation_process_command(CLI::App& app);  // one evaluation process (hidden)
Command add_probe_env_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_status_command(CLI::App& app);
Command add_scale_command(CLI::App& app);
Command add_checkpoint_command(CLI::App& app);
Command add_stop_command(CLI::App& app);
Command add_clean_command(CLI::App& app);

// `bench kernels`, `bench ring`, `bench collective` and `bench remote`, under
// `bench`; each sets `run` to what it does.
CLI::App* add_bench_kernels(CLI::App& bench, std::function<void()>& run);
CLI::App* add_bench_ring(CLI::App& bench, std::function<void()>& run);
CLI::App* add_bench_collective(CLI::App& bench, std::function<void()>& run);
CLI::App* add_bench_remote(CLI::App& bench, std::function<void()>& run);
CLI::App* add_bench_policy(CLI::App& bench, std::function<void()>& run);
CLI::App* add_bench_learner(CLI::App& bench, std::function<void()>& run);
CLI::App* add_bench_actors(CLI::App& bench, std::function<void()>& run);

}  // namespace pronghorn::cli
