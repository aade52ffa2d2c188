// `pronghorn scale --actors N`, `pronghorn checkpoint`, `pronghorn stop`:
// steer a running job over gRPC, with the job's token.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "tools/cli.h"
#include "tools/control_client.h"

namespace pronghorn::cli {

Command add_scale_command(CLI::App& app) {
  struct ScaleArgs {
    ControlArgs control;
    int actors = 0;
    bool oversubscribe = false;
  };
  auto args = std::make_shared<ScaleArgs>();
  CLI::App* command =
      app.add_subcommand("scale", "Grow or shrink a running job's actor processes on its node");
  add_control_options(command, args->control);
  command->add_option("--actors", args->actors, "actor processes wanted (0 pauses acting)")
      ->required();
  command->add_flag("--oversubscribe", args->oversubscribe,
                    "start them even past 2 per core or what free memory holds");
  return {command, [args] {
            v1::ScaleActorsReply r =
                ControlClient(args->control).scale(args->actors, args->oversubscribe);
            std::cout << fmt::format("actors: {} → {}\n", r.previous(), r.desired());
          }};
}

Command add_checkpoint_command(CLI::App& app) {
  auto args = std::make_shared<ControlArgs>();
  CLI::App* command = app.add_subcommand("checkpoint", "Make a running job write a checkpoint now");
  add_control_options(command, *args);
  return {command,
          [args] { std::cout << "checkpoint " << ControlClient(*args).save_checkpoint() << "\n"; }};
}

Command add_stop_command(CLI::App& app) {
  struct StopArgs {
    ControlArgs control;
    bool now = false;
  };
  auto args = std::make_shared<StopArgs>();
  CLI::App* command =
      app.add_subcommand("stop", "Stop a running job (after a checkpoint, unless --now)");
  add_control_options(command, args->control);
  command->add_flag("--now", args->now, "stop without writing a checkpoint first");
  return {command, [args] {
            const std::string path = ControlClient(args->control).stop(!args->now);
            std::cout << (path.empty() ? std::string("stopped\n")
                                       : "stopped; checkpoint " + path + "\n");
          }};
}

}  // namespace pronghorn::cli
