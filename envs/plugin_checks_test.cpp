// What crosses the plugin C ABI is checked (envs/pronghorn_env.h): flags,
// spec counts, writes past the buffers, and NaN or inf from any env. Each
// bad plugin is a real library built by envs/CMakeLists.txt.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/testing/error_of.h"
#include "envs/ended_rows.h"
#include "envs/finite.h"
#include "envs/plugin.h"
#include "envs/probe_report.h"
#include "envs/rng.h"
#include "envs/testing/buffers.h"

namespace pronghorn::envs {
namespace {

using pronghorn::testing::error_of;

#define EXPECT_CONTAINS(message, part)               \
  EXPECT_NE((message).find(part), std::string::npos) \
      << "\"" << (message) << "\" lacks \"" << (part) << "\""

// K envs of a bad plugin, reset, and one step of action 0 into `buf`.
std::string step_error(const char* plugin, int64_t k, Buffers& buf) {
  auto env = PluginLibrary::open(plugin)->make_env("broken", k, 1, 0);
  env->reset(buf.obs.data());
  std::vector<int32_t> actions(k, 0);
  return error_of([&] { env->step(actions.data(), buf.out()); });
}

EnvSpec broken_spec() {
  EnvSpec spec;
  spec.name = "broken";
  spec.obs_shape = {3};
  spec.action_size = 2;
  return spec;
}

TEST(PluginChecksTest, FlagOtherThanZeroOrOneIsAnErrorNamingThePluginAndRow) {
  Buffers buf(broken_spec(), 2);
  EXPECT_CONTAINS(step_error(PLUGIN_BAD_FLAGS, 2, buf),
                  std::string("env broken (plugin ") + PLUGIN_BAD_FLAGS +
                      "): step returned terminated = 7 for env 0: expected 0 or 1");
  EXPECT_EQ(buf.terminated, std::vector<uint8_t>(2, 0)) << "the bad flag never reached the caller";
}

TEST(PluginChecksTest, WritePastTheObservationBufferIsCaughtBeforeAnyOfItReachesTheCaller) {
  const int64_t k = 4;
  Buffers buf(broken_spec(), k);
  // Room past the caller's rows, with a pattern: a plugin writing straight
  // into the caller's buffer would have overwritten it.
  buf.obs.resize(buf.obs.size() + 64, 0x5A);
  std::fill(buf.obs.begin(), buf.obs.end(), 0x5A);
  auto env = PluginLibrary::open(PLUGIN_OVERRUN)->make_env("broken", k, 1, 0);
  std::vector<uint8_t> reset_obs(3 * 4 * k);
  env->reset(reset_obs.data());
  std::vector<int32_t> actions(k, 0);
  EXPECT_CONTAINS(error_of([&] { env->step(actions.data(), buf.out()); }),
                  "step wrote past the end of its observation buffer (48 bytes for 4 envs)");
  EXPECT_EQ(buf.obs, std::vector<uint8_t>(buf.obs.size(), 0x5A));
}

TEST(PluginChecksTest, NumSpecsLargerThanTheSpecsArrayIsRefusedWithoutReadingThroughGarbage) {
  const std::string message = error_of([] { PluginLibrary::open(PLUGIN_MANY_SPECS); });
  EXPECT_CONTAINS(message, std::string("env plugin ") + PLUGIN_MANY_SPECS + ": spec 1: obs_dtype");
  EXPECT_CONTAINS(message, "does the specs array hold num_specs = 1000 entries?");
}

TEST(PluginChecksTest, NanRewardIsNamedWithThePluginAndTheEnvRow) {
  Buffers buf(broken_spec(), 4);
  EXPECT_EQ(step_error(PLUGIN_NAN_REWARD, 4, buf), std::string("env broken (plugin ") +
                                                       PLUGIN_NAN_REWARD +
                                                       "): step returned reward NaN for env 3");
}

TEST(PluginChecksTest, InfObservationIsNamedWithTheElementAndTheEnvRow) {
  Buffers buf(broken_spec(), 2);
  EXPECT_EQ(step_error(PLUGIN_INF_OBS, 2, buf),
            std::string("env broken (plugin ") + PLUGIN_INF_OBS +
                "): step returned observation element 2 = inf for env 1");
}

// A C++ env that writes what it is told to: the check is the env
// interface's, so a built-in env is held to it as a plugin is.
class ScriptedEnv final : public BatchEnv {
 public:
  ScriptedEnv() : BatchEnv(broken_spec(), 3) {}
  float reward = 0, obs = 0, final_obs = 0;
  uint8_t ended = 0;  // of env 1

 private:
  void reset_unchecked(void* out) override { std::fill_n(static_cast<float*>(out), 9, obs); }
  void step_unchecked(const void*, const StepOutput& out) override {
    std::fill_n(static_cast<float*>(out.obs), 9, obs);
    std::fill_n(out.rewards, 3, 0.0f);
    out.rewards[2] = reward;
    std::fill_n(out.terminated, 3, 0);
    std::fill_n(out.truncated, 3, 0);
    out.truncated[1] = ended;
    if (out.final_obs != nullptr && ended) static_cast<float*>(out.final_obs)[3] = final_obs;
  }
};

TEST(FiniteCheckTest, AnyEnvsNanOrInfIsAnErrorWherePluginOrNot) {
  ScriptedEnv env;
  Buffers buf(env.spec(), 3);
  env.reset(buf.obs.data());
  const int32_t actions[3] = {0, 1, 0};
  auto step = [&] { return error_of([&] { env.step(actions, buf.out()); }); };
  EXPECT_EQ(step(), "");
  env.reward = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(step(), "env broken: step returned reward -inf for env 2");
  env.reward = 0;
  env.ended = 1;
  env.final_obs = std::nanf("");
  EXPECT_EQ(step(), "env broken: step returned final observation element 0 = NaN for env 1");
  env.ended = 0;
  EXPECT_EQ(step(), "") << "rows of episodes that did not end are not the env's";
  env.obs = std::numeric_limits<float>::infinity();
  EXPECT_EQ(step(), "env broken: step returned observation element 0 = inf for env 0");
  ScriptedEnv bad_start;
  bad_start.obs = std::nanf("");
  EXPECT_EQ(error_of([&] { bad_start.reset(buf.obs.data()); }),
            "env broken: reset returned observation element 0 = NaN for env 0");
}

TEST(FiniteCheckTest, FindsEveryKindOfNonFiniteAtEveryPosition) {
  const float bad[] = {std::nanf(""), -std::nanf(""), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  const float fine[] = {0.0f, -0.0f, std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::denorm_min(), -1e30f};
  for (int64_t n : {1, 7, 16, 33, 1000}) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = fine[i % 5];
    ASSERT_TRUE(all_finite(x.data(), n));
    ASSERT_EQ(first_non_finite(x.data(), n), -1);
    for (int64_t at : {int64_t{0}, n / 2, n - 1}) {
      for (float b : bad) {
        const float keep = x[at];
        x[at] = b;
        EXPECT_FALSE(all_finite(x.data(), n)) << "n " << n << " at " << at << " value " << b;
        EXPECT_EQ(first_non_finite(x.data(), n), at);
        x[at] = keep;
      }
    }
  }
}

TEST(EndedRowsTest, FindsExactlyTheEndedEnvsInOrder) {
  Rng rng(3, 0);
  for (int64_t k : {1, 7, 8, 9, 64, 1001}) {
    for (uint32_t percent : {0u, 3u, 50u, 100u}) {
      std::vector<uint8_t> terminated(k), truncated(k);
      std::vector<int64_t> expected, found;
      for (int64_t i = 0; i < k; ++i) {
        terminated[i] = rng.below(100) < percent;
        truncated[i] = rng.below(100) < percent;
        if (terminated[i] || truncated[i]) expected.push_back(i);
      }
      for_each_ended(terminated.data(), truncated.data(), k,
                     [&](int64_t i) { found.push_back(i); });
      EXPECT_EQ(found, expected) << "k " << k << ", " << percent << "% ended";
    }
  }
}

TEST(ProbeReportTest, SpecsRoundTripThroughTheirLine) {
  std::vector<EnvSpec> specs = builtin_env_specs();
  EnvSpec odd = broken_spec();
  odd.name = "a name with spaces";
  odd.action_kind = ActionKind::kContinuous;
  odd.action_size = 2;
  odd.action_low = {-0.1f, 1e-7f};
  odd.action_high = {0.3f, 3.4e38f};
  odd.max_episode_steps = 12345;
  odd.target_return = -246.125;
  specs.push_back(odd);
  for (const EnvSpec& spec : specs) {
    const EnvSpec back = decode_spec(encode_spec(spec));
    EXPECT_EQ(back.name, spec.name);
    EXPECT_EQ(back.describe(), spec.describe());
    EXPECT_EQ(back.obs_shape, spec.obs_shape);
    EXPECT_EQ(back.action_low, spec.action_low);
    EXPECT_EQ(back.action_high, spec.action_high);
    EXPECT_EQ(back.target_return, spec.target_return);
  }
  EXPECT_CONTAINS(error_of([] { decode_spec("spec 0 1"); }), "malformed spec line");
}

}  // namespace
}  // namespace pronghorn::envs
