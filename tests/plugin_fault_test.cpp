// Faulty env plugins against real `pronghorn train` jobs: a plugin that
// crashes, hangs or returns bad data ends the job with exit 1 and one line
// naming the plugin (never a learner killed by a signal, never a hang), and
// NaN or inf from an env kills its actor with exit 1 and a message naming
// the env row. The plugins are envs/testing/bad_plugin.c, one per defect.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/testing/job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;

// "Defects/Suite.Case/3" → "plugin-fault-PID-Suite-3": a valid run.name.
std::string run_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "plugin-fault-" + std::to_string(getpid()) + "-" + info->test_suite_name() +
                     "-" + info->name();
  for (char& c : name) {
    if (c == '/') c = '-';
  }
  return name;
}

struct Job {
  std::string name = run_name();
  std::string dir = ::testing::TempDir() + "/" + name;

  // The job's command line for the shell, with env.plugin = `plugin`.
  std::string command(const std::string& plugin) const {
    std::string line = std::string(PRONGHORN_BIN) + " --log-level warn";
    for (const std::string& arg : job_args(dir, name)) line += " '" + arg + "'";
    return line + " --set 'env.plugin=" + plugin + "'";
  }
};

struct Fault {
  const char* id;  // the test's name
  const char* plugin;
  std::vector<std::string> parts;  // what the job's error says besides the plugin's path
};

std::string fault_name(const ::testing::TestParamInfo<Fault>& info) { return info.param.id; }

class PluginFaultTest : public ::testing::TestWithParam<Fault> {};

TEST_P(PluginFaultTest, JobEndsWithExitOneAndOneLineNamingThePlugin) {
  const Fault& fault = GetParam();
  Job job;
  // timeout(1) is the test's deadline: a job that hangs is killed, exit 124.
  // A plugin gets 2 s to create, reset and step one env.
  const auto start = std::chrono::steady_clock::now();
  const auto [code, output] =
      shell("PRONGHORN_ENV_PROBE_TIMEOUT_S=2 timeout -k 5 25 " + job.command(fault.plugin));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  EXPECT_EQ(code, 1) << output;
  // One line: "pronghorn: env plugin PATH: …" or "pronghorn: env broken (plugin PATH): …".
  const size_t at = output.find("pronghorn: env ");
  ASSERT_NE(at, std::string::npos) << output;
  const std::string line = output.substr(at, output.find('\n', at) - at);
  EXPECT_NE(line.find(fault.plugin), std::string::npos) << line;
  for (const std::string& part : fault.parts) EXPECT_NE(line.find(part), std::string::npos) << line;
  EXPECT_FALSE(std::filesystem::exists(job.dir)) << "a job that never ran leaves no run directory";
  EXPECT_TRUE(leftover_segments(job.name).empty());
}

// "SEGV": the signal's name, or under a sanitizer its report's first line.
INSTANTIATE_TEST_SUITE_P(
    Defects, PluginFaultTest,
    ::testing::Values(
        Fault{"SegvCreate", PLUGIN_SEGV_CREATE, {"SEGV", "in create() of env \"broken\""}},
        Fault{"SegvDestroy", PLUGIN_SEGV_DESTROY, {"SEGV", "in destroy() of env \"broken\""}},
        Fault{"HangCreate", PLUGIN_HANG_CREATE, {"did not return within 2 s in create()"}},
        Fault{"BadFlags", PLUGIN_BAD_FLAGS, {"step returned terminated = 7 for env 0"}},
        Fault{"ManySpecs", PLUGIN_MANY_SPECS, {"spec 1: obs_dtype"}},
        Fault{"Overrun", PLUGIN_OVERRUN, {"step wrote past the end of its observation buffer"}}),
    fault_name);

// NaN or inf only where K > 1 (env 3, env 1): the probe's single env is
// fine, so the job starts, and each actor meets the bad value on its first
// step. The actor dies with exit 1 and the message; what the job does next
// is the supervisor's business, so the test stops it.
class ActorNonFiniteTest : public ::testing::TestWithParam<Fault> {};

TEST_P(ActorNonFiniteTest, ActorExitsWithOneAndNamesTheEnvRow) {
  const Fault& fault = GetParam();
  Job job;
  const std::string err = ::testing::TempDir() + "/" + job.name + ".err";
  pid_t pid =
      spawn("/bin/sh", {"-c", "exec " + job.command(fault.plugin) + " >/dev/null 2>" + err});
  StopOnExit guard{pid};
  const std::string message = "pronghorn: env broken (plugin " + std::string(fault.plugin) +
                              "): step returned " + fault.parts.front();
  EXPECT_TRUE(wait_for([&] { return slurp(err).find(message) != std::string::npos; }, 30s))
      << slurp(err);
  // main printed the error: the actor ended by exit 1, not by a signal.
  EXPECT_EQ(slurp(err).find("killed by signal"), std::string::npos) << slurp(err);
  kill(pid, SIGTERM);
  wait_exit(pid);
  guard.pid = -1;
  std::filesystem::remove_all(job.dir);
  std::filesystem::remove(err);
}

INSTANTIATE_TEST_SUITE_P(
    Defects, ActorNonFiniteTest,
    ::testing::Values(Fault{"NanReward", PLUGIN_NAN_REWARD, {"reward NaN for env 3"}},
                      Fault{"InfObs", PLUGIN_INF_OBS, {"observation element 2 = inf for env 1"}}),
    fault_name);

}  // namespace
