// Runs the built `pronghorn` binary and checks its exit codes and messages.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Result {
  int code;
  std::string out;
  std::string err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

Result pronghorn(const std::vector<std::string>& args) {
  std::string base = ::testing::TempDir() + "/cli_test_" + std::to_string(getpid());
  std::string command = PRONGHORN_BIN;
  for (const auto& arg : args) command += " " + shell_quote(arg);
  command += " >" + base + ".out 2>" + base + ".err";
  int status = std::system(command.c_str());
  Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(base + ".out"),
           slurp(base + ".err")};
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

TEST(CliTest, VersionPrintsVersionAndCudaSupport) {
  Result r = pronghorn({"--version"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("pronghorn 0.", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("CUDA: "), std::string::npos) << r.out;
}

TEST(CliTest, HelpListsOnlyWorkingSubcommands) {
  Result r = pronghorn({"--help"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("config"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("envs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bench"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  train "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  actor "), std::string::npos) << "the actor-only node's command:\n"
                                                       << r.out;
  EXPECT_EQ(r.out.find("actor-process"), std::string::npos) << "internal subcommand listed:\n"
                                                            << r.out;
  EXPECT_NE(r.out.find("  eval "), std::string::npos) << r.out;
  for (const char* control : {"status", "scale", "checkpoint", "stop"}) {
    EXPECT_NE(r.out.find(std::string("  ") + control + " "), std::string::npos) << r.out;
  }
  EXPECT_EQ(pronghorn({"config", "--help"}).code, 0);
}

TEST(CliTest, NoSubcommandIsAUsageError) {
  Result r = pronghorn({});
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(r.err.empty());
}

TEST(CliTest, UnknownSubcommandIsAUsageError) {
  Result r = pronghorn({"confg"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown subcommand 'confg' (did you mean config?)"), std::string::npos)
      << r.err;
}

TEST(CliTest, UnknownFlagIsAUsageError) {
  for (const auto& args : {std::vector<std::string>{"config", "--frobnicate"},
                           std::vector<std::string>{"--frobnicate", "config"}}) {
    Result r = pronghorn(args);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--frobnicate"), std::string::npos) << r.err;
  }
}

TEST(CliTest, BadLogLevelIsAUsageError) {
  Result r = pronghorn({"--log-level", "loud", "config"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--log-level loud"), std::string::npos) << r.err;
}

TEST(CliTest, ConfigPrintsTheResolvedConfigAsToml) {
  Result r = pronghorn({"config", "--set", "env.num_envs=12", "--set", "loss.kind=ppo"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("[env]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("num_envs = 12"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kind = \"ppo\""), std::string::npos) << r.out;
}

TEST(CliTest, PrintedConfigIsAcceptedAsAConfigFile) {
  Result first = pronghorn({"config", "--set", "actor.unroll_length=7"});
  ASSERT_EQ(first.code, 0) << first.err;
  std::string path = ::testing::TempDir() + "/cli_test_printed.toml";
  std::ofstream(path) << first.out;
  Result second = pronghorn({"config", "-c", path});
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  std::remove(path.c_str());
}

TEST(CliTest, InvalidConfigValueExitsTwoWithOneLine) {
  Result r = pronghorn({"config", "--set", "learner.batch_size=0"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("learner.batch_size = 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

TEST(CliTest, MissingConfigFileIsAUsageError) {
  Result r = pronghorn({"config", "-c", "/nonexistent/x.toml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/nonexistent/x.toml"), std::string::npos) << r.err;
}

TEST(CliTest, EnvsListsBuiltinsAndAPluginsEnvs) {
  Result r = pronghorn({"envs"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("cartpole   obs float32[4], 2 discrete actions"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("pong       obs uint8[1, 32, 32]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pendulum   obs float32[3], continuous"), std::string::npos) << r.out;
  Result with_plugin = pronghorn({"envs", "--plugin", CORRIDOR_PLUGIN});
  EXPECT_EQ(with_plugin.code, 0) << with_plugin.err;
  EXPECT_NE(with_plugin.out.find("corridor"), std::string::npos) << with_plugin.out;
}

TEST(CliTest, EnvsWithABrokenPluginFailsWithOneLine) {
  Result r = pronghorn({"envs", "--plugin", PRONGHORN_SOURCE_DIR "/README.md"});  // no library
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("env plugin " PRONGHORN_SOURCE_DIR "/README.md: cannot load"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

// One rule for every path a user names: one that does not exist is a usage
// error (exit 2) whose one line names it, whichever command or key named it.
TEST(CliTest, AMissingPathTheUserNamedIsExitTwoNamingIt) {
  const std::string missing = "/nonexistent/pronghorn-missing";
  const std::string run_dir =
      ::testing::TempDir() + "/cli_test_missing_" + std::to_string(getpid());
  const std::vector<std::vector<std::string>> commands = {
      {"config", "-c", missing + ".toml"},
      {"config", "--set", "env.plugin=" + missing + ".so"},
      {"envs", "--plugin", missing + ".so"},
      {"train", "--resume", missing},
      {"train", "--run-dir", run_dir, "--set", "env.plugin=" + missing + ".so"},
      {"train", "--run-dir", run_dir, "--set", "server.address=127.0.0.1:0", "--set",
       "server.metrics_port=-1", "--set", "actor.count=0", "--set", "server.token_file=" + missing},
      {"eval", missing},
      {"eval", "--checkpoint", missing + ".ckpt"},
      {"status", "--target", "127.0.0.1:1", "--token-file", missing},
  };
  for (const auto& command : commands) {
    std::string text;
    for (const auto& arg : command) text += arg + " ";
    Result r = pronghorn(command);
    EXPECT_EQ(r.code, 2) << text << "\n" << r.err;
    EXPECT_NE(r.err.find(missing), std::string::npos) << text << "\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(run_dir)) << text << "left " << run_dir;
  }
}

TEST(CliTest, BenchEnvPrintsStepsPerSecond) {
  Result r = pronghorn({"bench", "env", "--env", "pendulum", "--num-envs", "64", "--threads", "2",
                        "--seconds", "0.05"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bench env: pendulum K=64 threads=2: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("M env steps/s"), std::string::npos) << r.out;
}

// A config's env (configs/pendulum.toml: K = 64), the options given over it.
TEST(CliTest, BenchEnvStepsAConfigsEnvUnderTheOptionsGiven) {
  const std::string config = std::string(PRONGHORN_SOURCE_DIR) + "/configs/pendulum.toml";
  Result r = pronghorn({"bench", "env", "-c", config, "--seconds", "0.05"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bench env: pendulum K=64 threads=1: "), std::string::npos) << r.out;
  r = pronghorn({"bench", "env", "-c", config, "--num-envs", "8", "--seconds", "0.05"});
  EXPECT_NE(r.out.find("bench env: pendulum K=8 threads=1: "), std::string::npos) << r.out;
}

TEST(CliTest, BenchRingPrintsThroughputAgainstMemcpyAndLatency) {
  Result r = pronghorn({"bench", "ring", "--seconds", "0.1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bench ring: cartpole T=32 K=256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GB/s actor→learner, memcpy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("commit → consumer wake: median"), std::string::npos) << r.out;
}

TEST(CliTest, BenchLearnerPrintsSamplesPerSecondAtEachThreadCount) {
  Result r = pronghorn({"bench", "learner", "--model", "mlp", "--obs-shape", "4", "--obs-dtype",
                        "float32", "--actions", "2", "--unroll", "4", "--columns", "8", "--threads",
                        "1,2", "--repeats", "2"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| mlp | 4675 | cpu | 1 | 4 × 8 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| mlp | 4675 | cpu | 2 | 4 × 8 | "), std::string::npos) << r.out;
  Result bad = pronghorn({"bench", "learner", "--device", "gpu"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("learner.device = \"gpu\": expected one of auto, cpu, cuda"),
            std::string::npos)
      << bad.err;
  EXPECT_EQ(bad.out, "") << "no table header before the error";
}

// A Gaussian head and config keys: the MuJoCo presets' learner, whose batch
// is learner.epochs × learner.minibatches optimizer steps.
TEST(CliTest, BenchLearnerTakesAGaussianHeadAndConfigKeys) {
  Result r = pronghorn({"bench",        "learner",
                        "--model",      "mlp",
                        "--obs-shape",  "17",
                        "--obs-dtype",  "float32",
                        "--action-dim", "6",
                        "--loss",       "ppo",
                        "--unroll",     "4",
                        "--columns",    "8",
                        "--set",        "learner.epochs=3",
                        "--set",        "learner.minibatches=2",
                        "--set",        "model.separate_value=true",
                        "--repeats",    "2"});
  EXPECT_EQ(r.code, 0) << r.err;
  const size_t row = r.out.find("| cpu | 1 | 4 × 8 | ");
  ASSERT_NE(row, std::string::npos) << r.out;
  // ms/step, then the 6 optimizer steps.
  const size_t ms_end = r.out.find(" | ", row + 20);
  EXPECT_EQ(r.out.substr(ms_end, 5), " | 6 ") << r.out;
  Result bad = pronghorn({"bench", "learner", "--set", "learner.epochs=0"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("learner.epochs = 0"), std::string::npos) << bad.err;
}

// The whole actor side of a config, and nothing of it left behind: no
// segment in /dev/shm, no scratch run directory (of those not there before).
TEST(CliTest, BenchActorsPrintsStepsPerSecondAndLeavesNothing) {
  auto listing = [](const std::filesystem::path& dir, const std::string& part) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.find(part) != std::string::npos) names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  const auto tmp = std::filesystem::temp_directory_path();
  const std::vector<std::string> scratch_before = listing(tmp, "pronghorn-bench-");
  const std::vector<std::string> segments_before = listing("/dev/shm", "bench-actors");
  const std::string config = std::string(PRONGHORN_SOURCE_DIR) + "/configs/cartpole.toml";
  Result r = pronghorn({"bench", "actors", "-c", config, "--set", "actor.count=1", "--seconds",
                        "0.5", "--warmup", "0.2"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("bench actors: cartpole K=32 actors=1 T="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" env steps/s ("), std::string::npos) << r.out;
  EXPECT_EQ(listing(tmp, "pronghorn-bench-"), scratch_before);
  EXPECT_EQ(listing("/dev/shm", "bench-actors"), segments_before);
  Result none = pronghorn({"bench", "actors", "-c", config, "--set", "actor.count=0"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("actor.count = 0: nothing to measure"), std::string::npos) << none.err;
}

TEST(CliTest, BenchEnvRejectsAnUnknownEnvAndBadCounts) {
  Result unknown = pronghorn({"bench", "env", "--env", "cartpol", "--seconds", "0.05"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("did you mean cartpole?"), std::string::npos) << unknown.err;
  EXPECT_EQ(pronghorn({"bench", "env", "--num-envs", "0"}).code, 2);
  EXPECT_EQ(pronghorn({"bench"}).code, 2);
}

TEST(CliTest, DefaultConfigFileEqualsTheBuiltInDefaults) {
  Result builtin = pronghorn({"config"});
  Result file =
      pronghorn({"config", "-c", std::string(PRONGHORN_SOURCE_DIR) + "/configs/cartpole.toml"});
  EXPECT_EQ(file.code, 0) << file.err;
  EXPECT_EQ(file.out, builtin.out);
}

TEST(CliTest, TrainPrintConfigPrintsTheResolvedConfigWithARunName) {
  Result r = pronghorn({"train", "--print-config", "--set", "run.name=abc"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("name = \"abc\""), std::string::npos) << r.out;
}

// Several learners on one machine take free ports where the defaults would
// collide; a metrics port set for a scraper elsewhere (a pod's 0.0.0.0:7454,
// named in its scrape annotation) is kept.
TEST(CliTest, RanksFreeOnlyTheLoopbackDefaultPorts) {
  const std::vector<std::string> rank = {"train", "--print-config",
                                         "--set", "run.name=abc",
                                         "--set", "distributed.world_size=2",
                                         "--set", "distributed.rank=0",
                                         "--set", "distributed.rendezvous=127.0.0.1:0"};
  Result loopback = pronghorn(rank);
  EXPECT_EQ(loopback.code, 0) << loopback.err;
  EXPECT_NE(loopback.out.find("\nmetrics_port = 0 "), std::string::npos) << loopback.out;
  EXPECT_NE(loopback.out.find("address = \"127.0.0.1:0\""), std::string::npos) << loopback.out;
  std::vector<std::string> pod = rank;
  pod.insert(pod.end(), {"--set", "server.metrics_address=0.0.0.0"});
  Result exposed = pronghorn(pod);
  EXPECT_EQ(exposed.code, 0) << exposed.err;
  EXPECT_NE(exposed.out.find("\nmetrics_port = 7454 "), std::string::npos) << exposed.out;
}

// Debian's LibTorch is a CPU build, so asking for CUDA is an error naming the
// key, never a silent run on the CPU.
TEST(CliTest, CudaLearnerWithoutCudaIsAnErrorNotASilentFallback) {
  const std::string dir = ::testing::TempDir() + "/cli-test-cuda-" + std::to_string(getpid());
  Result r = pronghorn({"train", "--run-dir", dir, "--set", "learner.device=cuda", "--set",
                        "run.total_steps=1", "--set", "server.address=127.0.0.1:0", "--set",
                        "server.metrics_port=-1"});
  if (r.code == 0) GTEST_SKIP() << "this LibTorch has CUDA and a GPU is visible";
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("learner.device = \"cuda\""), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The presets of Python envs (Gymnasium's, EnvPool's) need an interpreter
// with their packages: tests/python_env_job_test.cpp checks them in the test
// venv.
TEST(CliTest, ShippedConfigsAreValid) {
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(PRONGHORN_SOURCE_DIR) + "/configs")) {
    std::ifstream file(entry.path());
    const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    if (text.find("\nname = \"gymnasium:") != std::string::npos ||
        text.find("\nname = \"envpool:") != std::string::npos) {
      continue;
    }
    Result r = pronghorn({"config", "-c", entry.path().string()});
    EXPECT_EQ(r.code, 0) << entry.path() << ": " << r.err;
    ++checked;
  }
  EXPECT_GE(checked, 3) << "cartpole, pong and pendulum";
}

}  // namespace
