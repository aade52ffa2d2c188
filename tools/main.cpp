// `pronghorn`: one binary, one subcommand per job. Wiring only: each
// subcommand lives in its own cmd_*.cpp. Exit codes: core/error.h.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "core/logging.h"
#include "core/suggest.h"
#include "fleet/child_process.h"
#include "fleet/zygote.h"
#include "kernels/accelerator.h"
#include "tools/cli.h"

namespace {

void print_version() {
  std::cout << "pronghorn " << PRONGHORN_VERSION << "\n"
            << pronghorn::kernels::describe(pronghorn::kernels::probe_accelerator()) << "\n";
}

// Names what was left over after parsing: an unknown subcommand or option.
void reject_leftovers(const CLI::App& app) {
  std::vector<std::string> leftovers = app.remaining();
  if (leftovers.empty()) return;
  const std::string& first = leftovers.front();
  if (first.starts_with("-")) throw pronghorn::UsageError("unknown option " + first);
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
  throw pronghorn::UsageError("unknown subcommand '" + first + "'" +
                              pronghorn::did_you_mean(first, names) + "; run with --help");
}

// The one line of an error, then exit at once. Unwinding has already cleaned
// up what this process owns (actors, shared memory, run directory); what may
// be left is a lost peer's Gloo threads, which LibTorch 1.13 cannot abort and
// whose destructors join: static destructors must not wait on them.
[[noreturn]] void leave(const std::exception& e, int code) {
  pronghorn::end_progress();  // the error line starts a line of its own
  std::cerr << "pronghorn: " << e.what() << "\n";
  std::cout.flush();
  std::cerr.flush();
  spdlog::default_logger()->flush();
  std::_Exit(code);
}

int run_command_line(const std::vector<std::string>& args, bool top);

// The zygote of `pronghorn train`'s actors, made while this process has one
// thread (after the start-up, before any subcommand runs): each actor is a
// fork of it that runs its own command line here, in-process, and exits
// with its code. Nullptr, and why in `failure`, when it cannot be made.
std::unique_ptr<pronghorn::fleet::Zygote> start_actor_zygote(std::string& failure) {
  try {
    return pronghorn::fleet::Zygote::start(
        [](const std::vector<std::string>& args) {
          const int code = run_command_line(args, /*top=*/false);
          std::cout.flush();  // it ends with _exit: nothing flushes after this
          std::cerr.flush();
          spdlog::default_logger()->flush();
          return code;
        },
        {"pronghorn", "zygote"});
  } catch (const std::exception& e) {
    failure = e.what();
    return nullptr;
  }
}

// Parses `args` (args[0] the program) and runs the subcommand; the exit
// code. `top`: this process's own command line, not an actor's in a fork.
// Only a broken invariant escapes (CLI11 wiring, a non-std exception): terminate, with the message.
// NOLINTNEXTLINE(bugprone-exception-escape)
int run_command_line(const std::vector<std::string>& args, bool top) {
  CLI::App app{"Pronghorn: distributed actor-learner reinforcement learning (IMPALA family)",
               "pronghorn"};
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "log verbosity: " + std::string(pronghorn::kLogLevels))
      ->capture_default_str();
  app.add_flag_callback(
      "--version",
      [] {
        print_version();
        throw CLI::Success();
      },
      "print the version and what CUDA support this build has");

  const std::vector<pronghorn::cli::Command> commands = {
      pronghorn::cli::add_train_command(app),
      pronghorn::cli::add_eval_command(app),
      pronghorn::cli::add_export_command(app),
      pronghorn::cli::add_status_command(app),
      pronghorn::cli::add_scale_command(app),
      pronghorn::cli::add_checkpoint_command(app),
      pronghorn::cli::add_stop_command(app),
      pronghorn::cli::add_clean_command(app),
      pronghorn::cli::add_config_command(app),
      pronghorn::cli::add_envs_command(app),
      pronghorn::cli::add_bench_command(app),
      pronghorn::cli::add_actor_command(app),
      pronghorn::cli::add_actor_process_command(app),
      pronghorn::cli::add_probe_env_command(app),
      pronghorn::cli::add_evaluation_process_command(app),
  };
  // Set after the subcommands exist, so they do not inherit it: leftovers
  // reach reject_leftovers() only at the top level, to be named there.
  app.allow_extras();

  try {
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    reject_leftovers(app);
    if (app.get_subcommands().empty()) {
      throw pronghorn::UsageError("a subcommand is required; run with --help");
    }
    std::unique_ptr<pronghorn::fleet::Zygote> zygote;
    std::string zygote_failure;
    for (const auto& command : commands) {
      if (top && command.starts_actors && command.parsed->parsed()) {
        zygote = start_actor_zygote(zygote_failure);
      }
    }
    pronghorn::init_logging("pronghorn", log_level);
    if (!zygote_failure.empty()) spdlog::warn("actors start by posix_spawn: {}", zygote_failure);
    pronghorn::fleet::start_actors_through(zygote.get());
    for (const auto& command : commands) {
      if (command.parsed->parsed()) command.run();
    }
    // The zygote ends with this scope.
    pronghorn::fleet::start_actors_through(nullptr);
  } catch (const CLI::Success& e) {  // --help and --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "pronghorn: " << e.what() << "; run with --help\n";
    return pronghorn::kExitUsage;
  } catch (const std::exception& e) {
    leave(e, pronghorn::exit_code_of(e));
  }
  return 0;
}

}  // namespace

// NOLINTNEXTLINE(bugprone-exception-escape): as run_command_line
int main(int argc, char** argv) {
  // A closed stdout or stderr (`pronghorn train | head`) makes writes fail
  // with EPIPE instead of killing the job mid-step: it goes on, and stops
  // with its checkpoint. Actors inherit the setting (through exec or the zygote).
  std::signal(SIGPIPE, SIG_IGN);
  return run_command_line(std::vector<std::string>(argv, argv + argc), /*top=*/true);
}
