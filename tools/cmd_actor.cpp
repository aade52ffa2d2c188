// `pronghorn actor --learner HOST:PORT`: an actor-only node (remote/actor_node.h).
// Its actor processes act with the learner's newest weights and their
// unrolls go to that learner; the node needs no config file. Ctrl-C or
// SIGTERM stops it (exit 0); it ends 0 with the job, 75 when no learner
// answered for --give-up-after seconds, 2 when refused.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <memory>

#include "core/config.h"
#include "core/error.h"
#include "core/token.h"
#include "remote/actor_node.h"
#include "tools/cli.h"
#include "tools/stop_signal.h"

namespace pronghorn::cli {
namespace {

struct NodeArgs {
  remote::NodeOptions node;
  std::string token_file;
};

std::string node_token(const std::string& token_file) {
  if (!token_file.empty()) {
    try {
      return read_token_file(token_file);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
  }
  if (const char* token = std::getenv("PRONGHORN_TOKEN"); token != nullptr && *token != 0) {
    return token;
  }
  throw UsageError(
      "pronghorn actor needs the job's token: --token-file FILE (e.g. the learner's "
      "runs/<name>/token) or the environment variable PRONGHORN_TOKEN");
}

// Names go into shared-memory segment names and the learner's status; the
// learner refuses others. The default (the hostname) is made one instead.
void check_node_name(const std::string& name) {
  const bool usable = !name.empty() && name.size() <= remote::kMaxNodeName &&
                      name.find_first_not_of(
                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789._-") == std::string::npos;
  if (!usable) {
    throw UsageError("--name '" + name +
                     "': expected 1 to 64 letters, digits, '.', '_' or '-' (default: the "
                     "hostname)");
  }
}

void run_node(NodeArgs args) {
  if (!parse_host_port(args.node.learner)) {
    throw UsageError("--learner '" + args.node.learner +
                     "': expected HOST:PORT, the learner's remote.address");
  }
  args.node.token = node_token(args.token_file);
  if (!args.node.name.empty()) check_node_name(args.node.name);
  args.node.version = PRONGHORN_VERSION;
  const remote::NodeExit exit = remote::run_actor_node(args.node, install_stop_handlers());
  if (exit.code == kExitTransient) throw TransientError(exit.line);
  spdlog::info("{}", exit.line);
}

}  // namespace

Command add_actor_command(CLI::App& app) {
  auto args = std::make_shared<NodeArgs>();
  CLI::App* command = app.add_subcommand(
      "actor",
      "Run actor processes for a learner on another machine (an actor-only node; Ctrl-C stops)");
  command->add_option("--learner", args->node.learner, "the learner's remote.address, HOST:PORT")
      ->required();
  command->add_option("--token-file", args->token_file,
                      "file holding the job's token (default: PRONGHORN_TOKEN)");
  command
      ->add_option("--processes", args->node.processes,
                   "actor processes to run (default: one per spare core)")
      ->check(CLI::Range(1, kMaxActors));
  command->add_option("--name", args->node.name,
                      "this node's name in the learner's status (default: the hostname)");
  command->add_option("--plugin", args->node.plugin,
                      "the job's env plugin here, when not at the job's env.plugin path");
  command->add_option("--python", args->node.python,
                      "a Python env's interpreter here, when not the job's env.python");
  command
      ->add_option("--give-up-after", args->node.give_up_after_s,
                   "exit 75 when no learner has answered for this many seconds")
      ->check(CLI::Range(1.0, 1e7))
      ->capture_default_str();
  command->add_option("--tls-ca", args->node.tls_ca, "PEM CA of the learner's certificate: TLS");
  command->add_option("--tls-cert", args->node.tls_cert, "PEM client certificate, mutual TLS");
  command->add_option("--tls-key", args->node.tls_key, "PEM key of --tls-cert");
  return {command, [args] { run_node(*args); }};
}

}  // namespace pronghorn::cli
