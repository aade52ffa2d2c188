// `pronghorn scale --actors N`, `pronghorn checkpoint`, `pronghorn stop`:
// steer a running job over gRPC, with the job's token. Each reply names the
// job that carried it out (run name and directory): with several jobs on one
// machine, the one on the default port answers a command without --run-dir.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "core/error.h"
#include "tools/cli.h"
#include "tools/control_client.h"

namespace pronghorn::cli {

namespace {

struct ScaleArgs {
  ControlArgs control;
  int actors = 0;
  bool oversubscribe = false;
  int rank = -1;     // several learners: the rank whose node to scale
  std::string node;  // or its node name
};

// Several learners: the control plane of the rank asked for, from rank 0's
// status rows (its address, and the job's token, which every rank takes).
ControlArgs rank_control(const ScaleArgs& a) {
  ControlClient rank0(a.control);
  const v1::Status s = rank0.status();
  if (s.world_size() <= 1) {
    if (!a.node.empty()) {
      std::string nodes;
      for (const v1::RemoteNode& n : s.remote_nodes())
        nodes += (nodes.empty() ? "" : ", ") + n.name();
      throw UsageError(fmt::format(
          "--node {}: no actor-only node of that name joined the learner at {}{} ({})", a.node,
          a.control.target, a.control.run_dir, nodes.empty() ? "none joined" : "joined: " + nodes));
    }
    throw UsageError("--rank: the job at " + a.control.target + a.control.run_dir +
                     " is a single learner; scale it without --rank");
  }
  if (s.ranks_size() == 0) {
    throw UsageError(
        "--rank/--node: the learner reached is not rank 0, or has not taken a step "
        "yet; ask rank 0 (its run directory or address)");
  }
  std::string known;
  std::vector<const v1::RankStatus*> matches;
  for (const v1::RankStatus& row : s.ranks()) {
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", row.rank(), row.node_name());
    const bool match =
        a.rank >= 0 ? static_cast<int>(row.rank()) == a.rank : row.node_name() == a.node;
    if (match) matches.push_back(&row);
  }
  if (matches.empty()) {
    throw UsageError(fmt::format("no rank {} in this job; its ranks: {}",
                                 a.rank >= 0 ? std::to_string(a.rank) : "on node " + a.node,
                                 known));
  }
  if (matches.size() > 1) {  // ranks sharing a host share its name
    throw UsageError(fmt::format("several ranks run on node {}; name one with --rank (ranks: {})",
                                 a.node, known));
  }
  const v1::RankStatus& row = *matches.front();
  if (row.rank() == 0) return a.control;
  if (row.control_address().empty()) {
    throw Error(fmt::format(
        "rank {} on node {} has no control address reachable from rank 0: its server.address is "
        "loopback on another node (set it to an address there), or it has not stepped yet",
        row.rank(), row.node_name()));
  }
  ControlArgs other = a.control;
  other.target = row.control_address();
  other.run_dir.clear();
  other.token_file.clear();
  other.token = rank0.token();
  return other;
}

// Whether `node` is an actor-only node that joined the learner `control` reaches.
bool is_remote_node(const ControlArgs& control, const std::string& node) {
  const v1::Status s = ControlClient(control).status();
  return std::any_of(s.remote_nodes().begin(), s.remote_nodes().end(),
                     [&](const v1::RemoteNode& row) { return row.name() == node; });
}

}  // namespace

Command add_scale_command(CLI::App& app) {
  auto args = std::make_shared<ScaleArgs>();
  CLI::App* command =
      app.add_subcommand("scale", "Grow or shrink a running job's actor processes on its node");
  add_control_options(command, args->control);
  command->add_option("--actors", args->actors, "actor processes wanted (0 pauses acting)")
      ->required();
  command->add_flag("--oversubscribe", args->oversubscribe,
                    "start them even past 2 per core or what free memory holds");
  auto* rank = command->add_option("--rank", args->rank,
                                   "several learners: scale this rank's node (ask rank 0)");
  command
      ->add_option("--node", args->node,
                   "scale this node: an actor-only node that joined the learner reached, or "
                   "(several learners, ask rank 0) a learner's node")
      ->excludes(rank);
  return {command, [args] {
            if (!args->node.empty() && is_remote_node(args->control, args->node)) {
              ControlClient client(args->control);
              const std::string job = client.job_named();
              const v1::ScaleActorsReply r = client.scale(args->actors, false, args->node);
              std::cout << fmt::format("actors on {}: {}{}\n", args->node, r.desired(), job);
              return;
            }
            const bool other = args->rank >= 0 || !args->node.empty();
            const ControlArgs target = other ? rank_control(*args) : args->control;
            ControlClient client(target);
            const std::string job = client.job_named();
            v1::ScaleActorsReply r = client.scale(args->actors, args->oversubscribe);
            std::cout << fmt::format("actors: {} → {}{}\n", r.previous(), r.desired(), job);
          }};
}

Command add_checkpoint_command(CLI::App& app) {
  auto args = std::make_shared<ControlArgs>();
  CLI::App* command = app.add_subcommand("checkpoint", "Make a running job write a checkpoint now");
  add_control_options(command, *args);
  return {command, [args] {
            ControlClient client(*args);
            const std::string job = client.job_named();
            std::cout << "checkpoint " << client.save_checkpoint() << job << "\n";
          }};
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
            ControlClient client(args->control);
            const std::string job = client.job_named();  // asked first: a stopped job is gone
            const std::string path = client.stop(!args->now);
            std::cout << "stopped" << job << (path.empty() ? "" : "; checkpoint " + path) << "\n";
          }};
}

}  // namespace pronghorn::cli
