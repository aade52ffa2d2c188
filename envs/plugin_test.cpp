#include "envs/plugin.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/testing/error_of.h"
#include "envs/rng.h"
#include "envs/testing/buffers.h"

namespace pronghorn::envs {
namespace {

using pronghorn::testing::error_of;

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos)
      << "\"" << message << "\" lacks \"" << part << "\"";
}

// Steps `a` and `b` with the same random actions; asserts identical outputs.
void expect_same_trajectories(BatchEnv& a, BatchEnv& b, int steps) {
  const int64_t k = a.num_envs();
  Buffers ba(a.spec(), k), bb(b.spec(), k);
  a.reset(ba.obs.data());
  b.reset(bb.obs.data());
  ASSERT_EQ(ba.obs, bb.obs);
  Rng rng(8, 8);
  std::vector<uint8_t> actions(a.spec().action_bytes() * k);
  for (int t = 0; t < steps; ++t) {
    if (a.spec().action_kind == ActionKind::kDiscrete) {
      auto* act = reinterpret_cast<int32_t*>(actions.data());
      for (int64_t i = 0; i < k; ++i)
        act[i] = rng.below(static_cast<uint32_t>(a.spec().action_size));
    } else {
      auto* act = reinterpret_cast<float*>(actions.data());
      for (int64_t i = 0; i < k * a.spec().action_size; ++i) {
        act[i] = static_cast<float>(rng.uniform(a.spec().action_low[0], a.spec().action_high[0]));
      }
    }
    a.step(actions.data(), ba.out());
    b.step(actions.data(), bb.out());
    ASSERT_EQ(ba.obs, bb.obs) << a.spec().name << " step " << t;
    ASSERT_EQ(ba.rewards, bb.rewards) << a.spec().name << " step " << t;
    ASSERT_EQ(ba.terminated, bb.terminated);
    ASSERT_EQ(ba.truncated, bb.truncated);
  }
}

TEST(PluginTest, BuiltinLibraryDrivesEveryBuiltinEnvIdentically) {
  auto library = PluginLibrary::open(BUILTIN_PLUGIN);
  ASSERT_EQ(library->specs().size(), builtin_env_specs().size());
  for (const EnvSpec& spec : builtin_env_specs()) {
    auto through_abi = library->make_env(spec.name, 16, 9, 0);
    auto direct = make_builtin_env(spec.name, 16, 9, 0);
    EXPECT_EQ(through_abi->spec().describe(), direct->spec().describe());
    EXPECT_EQ(through_abi->spec().target_return, direct->spec().target_return);
    expect_same_trajectories(*through_abi, *direct, 600);
  }
}

TEST(PluginTest, ExampleCorridorPluginRunsFromConfig) {
  EnvConfig config;
  config.plugin = CORRIDOR_PLUGIN;
  config.num_envs = 4;
  auto env = make_env(config, 1);
  EXPECT_EQ(env->spec().name, "corridor");
  EXPECT_EQ(env->spec().describe(), "obs float32[2], 2 discrete actions, time limit 50");
  EXPECT_EQ(env->spec().target_return, 0.95) << "declared by pronghorn_env_plugin_target";
  Buffers buf(env->spec(), 4);
  env->reset(buf.obs.data());
  std::vector<int32_t> right(4, 1);
  for (int t = 0; t < 4; ++t) env->step(right.data(), buf.out());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(buf.rewards[i], 1.0f) << "four steps right reach the goal";
    EXPECT_TRUE(buf.terminated[i]);
    EXPECT_FLOAT_EQ(buf.final_obs_as<float>()[2 * i], 1.0f);
    EXPECT_FLOAT_EQ(buf.obs_as<float>()[2 * i], 0.5f) << "a new episode starts mid-corridor";
  }
}

TEST(PluginTest, OutOfRangeActionIsCaughtBeforeThePlugin) {
  auto env = PluginLibrary::open(CORRIDOR_PLUGIN)->make_env("corridor", 2, 1, 0);
  Buffers buf(env->spec(), 2);
  env->reset(buf.obs.data());
  int32_t actions[2] = {1, 7};
  expect_contains(error_of([&] { env->step(actions, buf.out()); }),
                  "env corridor: action 7 of env 1 is out of range");
}

TEST(PluginTest, MissingFile) {
  expect_contains(error_of([] { PluginLibrary::open("/nonexistent/libenv.so"); }),
                  "env plugin /nonexistent/libenv.so: no such file");
}

TEST(PluginTest, NotASharedLibrary) {
  std::string path = ::testing::TempDir() + "/not_a_library.so";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("hello", f);
    std::fclose(f);
  }
  expect_contains(error_of([&] { PluginLibrary::open(path); }), "cannot load");
  std::remove(path.c_str());
}

TEST(PluginTest, MissingEntrySymbol) {
  expect_contains(error_of([] { PluginLibrary::open(PLUGIN_NO_ENTRY); }),
                  "missing symbol pronghorn_env_plugin_entry");
}

TEST(PluginTest, WrongAbiVersion) {
  expect_contains(error_of([] { PluginLibrary::open(PLUGIN_BAD_ABI); }),
                  "built for env ABI version 99; this Pronghorn speaks version 1");
}

TEST(PluginTest, InconsistentSpec) {
  std::string message = error_of([] { PluginLibrary::open(PLUGIN_BAD_SPEC); });
  expect_contains(message, PLUGIN_BAD_SPEC);
  expect_contains(message, "spec 0: obs_rank = 0: expected 1 to 4");
}

TEST(PluginTest, ATargetThatIsNotFiniteIsRefused) {
  std::string message = error_of([] { PluginLibrary::open(PLUGIN_NAN_TARGET); });
  expect_contains(message, PLUGIN_NAN_TARGET);
  expect_contains(message, "pronghorn_env_plugin_target(0) declared a target of nan");
}

TEST(PluginTest, APluginWithoutATargetDeclaresNone) {
  EXPECT_EQ(PluginLibrary::open(PLUGIN_FAILING)->specs().front().target_return, 0);
}

TEST(PluginTest, MissingFunction) {
  expect_contains(error_of([] { PluginLibrary::open(PLUGIN_NO_STEP); }), "missing function step");
}

TEST(PluginTest, ErrorsReturnedByThePluginCarryItsMessage) {
  auto library = PluginLibrary::open(PLUGIN_FAILING);
  expect_contains(error_of([&] { library->make_env("broken", 9, 1, 0); }),
                  "(env \"broken\"): create failed: at most 8 envs, asked for 9");
  auto env = library->make_env("broken", 2, 1, 0);
  Buffers buf(env->spec(), 2);
  env->reset(buf.obs.data());
  int32_t actions[2] = {0, 1};
  expect_contains(error_of([&] { env->step(actions, buf.out()); }),
                  "step failed: the simulator lost its licence");
}

TEST(PluginTest, UnknownEnvNameInAMultiEnvPlugin) {
  auto library = PluginLibrary::open(BUILTIN_PLUGIN);
  std::string message = error_of([&] { library->make_env("chess", 1, 1, 0); });
  expect_contains(message, "env.name = \"chess\"");
  expect_contains(message, "offers cartpole, pong, pendulum");
}

}  // namespace
}  // namespace pronghorn::envs
