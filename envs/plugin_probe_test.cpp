// Plugins are tried in a child process (envs/plugin_probe.h): a crash, a
// hang or an error there is one Error naming the plugin, and this process
// lives on. The child is testing/probe_child_main.cpp, which serves the
// probe as `pronghorn probe-env` does.
#include "envs/plugin_probe.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>

#include "core/error.h"
#include "core/testing/error_of.h"

namespace pronghorn::envs {
namespace {

using namespace std::chrono_literals;
using pronghorn::testing::error_of;

#define EXPECT_CONTAINS(message, part)               \
  EXPECT_NE((message).find(part), std::string::npos) \
      << "\"" << (message) << "\" lacks \"" << (part) << "\""

ProbeCommand child(std::chrono::milliseconds deadline = 30s) { return {PROBE_CHILD, {}, deadline}; }

EnvConfig plugin(const std::string& path, const std::string& name = "") {
  EnvConfig config;
  config.plugin = path;
  config.name = name;
  config.num_envs = 64;
  return config;
}

// Every probe reaps its child, whatever happened to it.
void expect_no_child_left() {
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(PluginProbeTest, WorkingPluginsSpecComesBackFromTheChild) {
  EXPECT_EQ(probe_env_spec(plugin(CORRIDOR_PLUGIN), child()).describe(),
            "obs float32[2], 2 discrete actions, time limit 50");
  EnvConfig limited = plugin(BUILTIN_PLUGIN, "pendulum");
  limited.max_episode_steps = 7;
  const EnvSpec spec = probe_env_spec(limited, child());
  EXPECT_EQ(spec.name, "pendulum");
  EXPECT_EQ(spec.describe(),
            "obs float32[3], continuous actions float32[1] in [-2, 2], time limit 7");
  expect_no_child_left();
}

TEST(PluginProbeTest, ListsEveryEnvOfAPlugin) {
  const std::vector<EnvSpec> specs = probe_plugin_specs(BUILTIN_PLUGIN, child());
  const std::vector<EnvSpec> builtin = builtin_env_specs();
  ASSERT_EQ(specs.size(), builtin.size());
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(specs[i].describe(), builtin[i].describe());
}

TEST(PluginProbeTest, BuiltinEnvNeedsNoChild) {
  EnvConfig config;
  config.name = "cartpole";
  EXPECT_EQ(probe_env_spec(config, {"/nonexistent/probe", {}, 1s}).name, "cartpole");
}

TEST(PluginProbeTest, CrashInCreateIsAnErrorNamingThePluginTheSignalAndTheCall) {
  const std::string message = error_of([] { probe_env_spec(plugin(PLUGIN_SEGV_CREATE), child()); });
  EXPECT_CONTAINS(message, std::string("env plugin ") + PLUGIN_SEGV_CREATE + ": ");
  // "killed by SIGSEGV (Segmentation fault)"; under a sanitizer, its report's "SEGV".
  EXPECT_CONTAINS(message, "SEGV");
  EXPECT_CONTAINS(message, "in create() of env \"broken\"");
  expect_no_child_left();
}

TEST(PluginProbeTest, CrashInDestroyIsAnErrorNamingTheCall) {
  const std::string message =
      error_of([] { probe_env_spec(plugin(PLUGIN_SEGV_DESTROY), child()); });
  EXPECT_CONTAINS(message, std::string("env plugin ") + PLUGIN_SEGV_DESTROY + ": ");
  EXPECT_CONTAINS(message, "SEGV");
  EXPECT_CONTAINS(message, "in destroy() of env \"broken\"");
}

TEST(PluginProbeTest, HangInCreateIsKilledAtTheDeadline) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message =
      error_of([] { probe_env_spec(plugin(PLUGIN_HANG_CREATE), child(500ms)); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_CONTAINS(message, std::string("env plugin ") + PLUGIN_HANG_CREATE +
                               ": did not return within 0.5 s in create() of env \"broken\"");
  expect_no_child_left();
}

TEST(PluginProbeTest, GarbageSpecsAreRefusedInTheChild) {
  EXPECT_CONTAINS(error_of([] { probe_plugin_specs(PLUGIN_MANY_SPECS, child()); }),
                  "spec 1: obs_dtype");
}

TEST(PluginProbeTest, ThePluginsOwnErrorsAndBadFirstStepsKeepTheirMessages) {
  EXPECT_CONTAINS(error_of([] { probe_env_spec(plugin(PLUGIN_FAILING), child()); }),
                  "step failed: the simulator lost its licence");
  EXPECT_CONTAINS(error_of([] { probe_env_spec(plugin(PLUGIN_BAD_FLAGS), child()); }),
                  "step returned terminated = 7 for env 0");
  EXPECT_CONTAINS(error_of([] { probe_env_spec(plugin(PLUGIN_OVERRUN), child()); }),
                  "step wrote past the end of its observation buffer");
  EXPECT_CONTAINS(error_of([] { probe_env_spec(plugin("/nonexistent/libenv.so"), child()); }),
                  "env plugin /nonexistent/libenv.so: no such file");
  // A usage error in the child is one here too (exit 2, not 1).
  EXPECT_CONTAINS(
      error_of<UsageError>([] { probe_env_spec(plugin(BUILTIN_PLUGIN, "chess"), child()); }),
      "offers cartpole, pong, pendulum");
}

}  // namespace
}  // namespace pronghorn::envs
