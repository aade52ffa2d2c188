// Trying an env plugin in a child process, so that a plugin which crashes or
// hangs takes only the child with it, never the learner or the CLI:
//
//   parent: spawn this binary's `probe-env` → read the report, with a
//           deadline → reap the child → the spec, or one Error
//   child:  dlopen → create one env (K = 1) → reset → step once → destroy →
//           report each stage, the spec, or the error, over a pipe (fd 3)
//
// The child is /proc/self/exe executed afresh (posix_spawn, never a bare
// fork: LibTorch and spdlog threads exist), as actors are. What goes wrong
// becomes an Error naming the plugin file and how: the signal and the call
// it hit ("killed by SIGSEGV (Segmentation fault) in destroy() of env
// \"x\""), the call that did not return by the deadline, or the plugin's own
// message; a UsageError from the child (an env name the plugin lacks) stays
// one. Built-in envs need no child.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "envs/env.h"

namespace pronghorn::envs {

// What the child is asked to do, and its command-line form.
struct ProbeRequest {
  std::string plugin;    // path of the library
  std::string env_name;  // the env to try (a one-env plugin's whatever the name)
  int64_t max_episode_steps = 0;
  bool list = false;  // only load the library and report every spec

  // "--plugin P --max-episode-steps M [--env N] [--list]"
  std::vector<std::string> args() const;
};

// How to start the child and how long to give it. The default runs this
// binary's hidden subcommand; tests run a small binary of their own.
struct ProbeCommand {
  std::string binary = "/proc/self/exe";
  std::vector<std::string> args = {"probe-env"};  // before the request's
  std::chrono::milliseconds deadline = default_probe_deadline();

  // PRONGHORN_ENV_PROBE_TIMEOUT_S (seconds) when set, else 60 s: long enough
  // for a simulator that loads assets, short enough that a hang is noticed.
  static std::chrono::milliseconds default_probe_deadline();
};

// The file descriptor the child writes its report to.
inline constexpr int kProbeReportFd = 3;

// The spec the learner sizes its ring by: env.plugin's env tried in a child,
// else the built-in env.name (made here, with K = 1).
EnvSpec probe_env_spec(const EnvConfig& config, const ProbeCommand& command = {});

// Every env the plugin at `path` offers (loaded in a child; none created).
std::vector<EnvSpec> probe_plugin_specs(const std::string& path, const ProbeCommand& command = {});

// The child's side, what `pronghorn probe-env` runs: does what `request`
// asks and writes the report to `report_fd`. Rethrows what it reported, so
// the child also exits non-zero.
void serve_probe(const ProbeRequest& request, int report_fd);

}  // namespace pronghorn::envs
