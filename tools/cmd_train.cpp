// `pronghorn train`: one whole job on this machine — a learner that spawns and
// supervises the actors (docs/architecture.md §2) — writing its run directory:
// config.toml, metrics.jsonl, train.log. Ctrl-C stops it cleanly.
// `pronghorn actor` is the actor process the learner starts (not for users).
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>

#include "actor/actor.h"
#include "control/control_plane.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/run_dir.h"
#include "learner/job_check.h"
#include "learner/learner.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) { g_stop = true; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string default_run_name() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::localtime(&now));
  return text;
}

struct TrainArgs {
  ConfigArgs config;
  std::string run_dir;
  std::string resume;
  bool print_config = false;
};

// The config.toml of the run being resumed: a file this program wrote, so a
// FIFO or a device there is refused rather than read (a FIFO would block).
std::string resumed_config(const std::string& run_dir) {
  std::string path = run_dir + "/config.toml";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw UsageError(path + ": not a regular file; --resume reads the run's own config.toml");
  }
  return path;
}

void run_train(const TrainArgs& args) {
  // --resume DIR: the run's own resolved config, then any --set on top.
  Config config = args.resume.empty()
                      ? args.config.load()
                      : load_config(resumed_config(args.resume), args.config.overrides);
  const bool generated_name = config.run.name.empty();
  if (generated_name) config.run.name = default_run_name();
  // What `pronghorn config` refuses, refused before a run directory exists;
  // the env probed once here serves the learner.
  const EnvSpec env = learner::check_job_config(config);
  if (args.print_config) {
    std::cout << to_toml(config);
    return;
  }
  using Mode = RunDirectory::Mode;
  // A name made from the clock gives way to a -2, -3… when taken (two jobs in
  // one second); a name or directory the user chose is refused when taken.
  RunDirectory run = !args.resume.empty() ? RunDirectory(args.resume, Mode::kResume)
                     : !args.run_dir.empty()
                         ? RunDirectory(args.run_dir, Mode::kNew)
                         : RunDirectory(config.run.dir + "/" + config.run.name,
                                        generated_name ? Mode::kNewOrSuffixed : Mode::kNew);
  if (generated_name && args.run_dir.empty() && args.resume.empty()) config.run.name = run.name();
  const std::string& dir = run.path();
  bool started = false;
  learner::TrainResult r;
  try {
    write_file_atomically(dir + "/config.toml", to_toml(config));
    add_log_file(dir + "/train.log");
    install_stop_handlers();
    learner::ControlBoard board;
    learner::Learner learner({config, env, dir, !args.resume.empty()}, board, g_stop);
    control::ControlPlane control(config.server, dir, board);
    started = true;
    r = learner.run();
  } catch (...) {
    if (!started) run.remove_if_new();  // nothing of a job that never ran is kept
    throw;
  }
  if (r.reached_target) {
    std::cout << fmt::format(
        "solved: mean return {:.1f} ≥ {} over the last 100 episodes after {:.1f} s and {} env "
        "steps; run directory {}\n",
        r.return_mean, config.run.target_return, r.seconds, r.env_steps, dir);
  } else {
    std::cout << fmt::format(
        "stopped after {:.1f} s and {} env steps, mean return {:.1f}; run "
        "directory {}\n",
        r.seconds, r.env_steps, r.return_mean, dir);
  }
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* command = app.add_subcommand(
      "train", "Train on this machine: a learner and its actor processes (Ctrl-C stops)");
  add_config_options(command, args->config);
  command->add_option("--run-dir", args->run_dir, "run directory (default: <run.dir>/<run.name>)");
  command
      ->add_option("--resume", args->resume,
                   "continue the run in this directory from its newest valid checkpoint")
      ->check(CLI::ExistingDirectory);
  command->add_flag("--print-config", args->print_config, "print the resolved config and exit");
  return {command, [args] { run_train(*args); }};
}

Command add_actor_command(CLI::App& app) {
  struct ActorArgs {
    std::string config, ring, slab;
    uint32_t id = 0;
    int learner_pid = 0;
  };
  auto args = std::make_shared<ActorArgs>();
  CLI::App* command = app.add_subcommand("actor", "An actor process, started by the learner");
  command->group("");  // internal: not listed in --help
  command->add_option("--config", args->config, "the run's config.toml")->required();
  command->add_option("--ring", args->ring, "shm name of the ring")->required();
  command->add_option("--slab", args->slab, "shm name of the weight slab")->required();
  command->add_option("--actor-id", args->id, "this actor's index")->required();
  command->add_option("--learner-pid", args->learner_pid, "exit when this process is gone");
  return {command, [args] {
            init_logging("actor" + std::to_string(args->id), "info");
            install_stop_handlers();
            actor::run_actor({load_config(args->config, {}), args->ring, args->slab, args->id,
                              args->learner_pid},
                             g_stop);
          }};
}

}  // namespace pronghorn::cli
