// What a user's Python env, or its worker, can get wrong: each one clear
// error naming the env (and at start the interpreter), never a hang or a
// trusted lie.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/testing/error_of.h"
#include "envs/python_env.h"
#include "envs/testing/buffers.h"
#include "envs/testing/python_envs.h"

namespace pronghorn::envs {
namespace {

using pronghorn::testing::error_of;
using testing::expect_contains;
using testing::python_env;
using testing::test_python;
using testing::use_test_envs;

// The error of `env`'s first step (action 0 in every env, a discrete env),
// `between` run after its reset; "" when it steps.
std::string error_of_first_step(
    PythonEnv& env, const std::function<void()>& between = [] {}) {
  Buffers b(env.spec(), env.num_envs());
  env.reset(b.obs.data());
  between();
  const std::vector<int32_t> actions(static_cast<size_t>(env.num_envs()), 0);
  return error_of([&] { env.step(actions.data(), b.out(false)); });
}

// What a user can name wrong: one UsageError naming it and the interpreter.
TEST(PythonEnvTest, WhatCannotBeHostedIsOneClearErrorAtStart) {
  use_test_envs();
  const std::string python = test_python();
  auto refused = [&](const std::string& name, const OptionTable& options = {}) {
    EnvConfig config = python_env(name, python, 2);
    config.options = options;
    return error_of<UsageError>([&] { PythonEnv::start(config, 1); });
  };
  std::string e = refused("python:no_such_module_xyz:make_env");
  expect_contains(e, "cannot import no_such_module_xyz");
  expect_contains(e, python);
  expect_contains(refused("python:pronghorn_test_envs:no_such_callable"),
                  "pronghorn_test_envs has no callable no_such_callable");
  expect_contains(refused("python:pronghorn_test_envs:not_callable"), "has no callable");
  expect_contains(refused("gymnasium:NoSuchEnv-v9"), "NoSuchEnv");
  e = refused("gymnasium:CartPole-v1", {{"no_such_option", "1"}});
  expect_contains(e, "no_such_option");
  expect_contains(e, "TypeError");
  expect_contains(refused("gymnasium:CartPole-v1", {{"vectorization_mode", "\"async\""}}),
                  "env.options.vectorization_mode = 'async'");
  // CartPole's own vector env has no SAME_STEP autoreset to ask for.
  expect_contains(
      refused("gymnasium:CartPole-v1", {{"vectorization_mode", "\"vector_entry_point\""}}),
      "autoreset_mode");
  expect_contains(
      refused("gymnasium:ALE/Pong-v5", {{"vectorization_mode", "\"vector_entry_point\""},
                                        {"frame_skip", "4"}}),  // EnvPool's spelling
      "frame_skip");
  e = refused("python:pronghorn_test_envs:make_dict_walk");
  expect_contains(e, "observation space Dict");
  expect_contains(e, "not supported");
  e = refused("python:pronghorn_test_envs:make_next_step_vector");
  expect_contains(e, "SAME_STEP");
  e = error_of<UsageError>(
      [&] { PythonEnv::start(python_env("gymnasium:CartPole-v1", "/no/such/python"), 1); });
  expect_contains(e, "cannot run env.python = \"/no/such/python\"");
}

TEST(PythonEnvTest, AnInterpreterOlderThan310IsRefusedInWords) {
  const auto [old, version] = testing::other_python([](int minor) { return minor < 10; });
  if (old.empty()) {
    PRONGHORN_SKIP_UNLESS_CI(
        "no Python older than 3.10 on this machine (pythonX.Y on PATH or pyenv)");
  }
  const std::string e =
      error_of<UsageError>([&] { PythonEnv::start(python_env("gymnasium:CartPole-v1", old), 1); });
  expect_contains(e, "this is Python " + version + "; Python envs need 3.10 or newer");
  expect_contains(e, old);
}

// A worker that sends a spec of its own making: env.python is a script that
// answers in its place, with `spec` and a memfd of `bytes` bytes (`seal`:
// sealed as the worker seals it).
std::string fake_worker(const std::string& spec, int bytes, bool seal) {
  static int count = 0;
  const std::string path = ::testing::TempDir() + "fake-python-" + std::to_string(getpid()) + "-" +
                           std::to_string(count++);
  std::ofstream out(path);
  out << "#!" << test_python() << "\n"
      << "import fcntl, os, socket\n"
      << "control = socket.socket(fileno=3)\n"
      << "fd = os.memfd_create('fake', os.MFD_ALLOW_SEALING)\n"
      << "os.ftruncate(fd, " << bytes << ")\n"
      << (seal ? "fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)\n"
               : "")
      << "socket.send_fds(control, [b\"spec " << spec << "\\n\"], [fd])\n"
      << "control.recv(16)\n";
  out.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

TEST(PythonEnvTest, AMalformedSpecIsRefusedNotTrusted) {
  const std::string good_layout =
      "layout = {actions = 0, obs = 64, rewards = 128, terminated = 192, truncated = 256, "
      "final_obs = 320, size = 384}";
  const std::string good =
      "{obs_dtype = 'float32', obs_shape = [2], action_kind = 'discrete', "
      "action_size = 2, max_episode_steps = 0, " +
      good_layout + "}";
  auto refused = [&](const std::string& spec, int bytes, bool seal) {
    return error_of<UsageError>([&] {
      PythonEnv::start(python_env("gymnasium:Fake-v0", fake_worker(spec, bytes, seal), 2), 1);
    });
  };
  EXPECT_EQ(refused(good, 384, true), "") << "the good spec is taken";
  expect_contains(refused("5", 384, true), "spec is not a table");
  std::string bad = good;
  bad.replace(bad.find("obs = 64"), 8, "obs = -64");
  expect_contains(refused(bad, 384, true), "obs is not an integer in [0,");
  bad = good;
  bad.replace(bad.find("obs_shape = [2]"), 15, "obs_shape = []");
  expect_contains(refused(bad, 384, true), "observation rank not in [1, 4]");
  bad = good;
  bad.replace(bad.find("size = 384"), 10, "size = 100");
  expect_contains(refused(bad, 384, true), "memory layout does not hold its spec");
  bad = good;
  bad.replace(bad.find("action_kind = 'discrete'"), 24,
              "action_kind = 'continuous', action_low = [-1.0], action_high = [1.0, 2.0]");
  expect_contains(refused(bad, 384, true), "action bounds do not have 2 values");
  expect_contains(error_of([&] {
                    PythonEnv::start(
                        python_env("gymnasium:Fake-v0", fake_worker(good, 64, true), 2), 1);
                  }),
                  "memory is smaller than its layout says");
  expect_contains(error_of([&] {
                    PythonEnv::start(
                        python_env("gymnasium:Fake-v0", fake_worker(good, 384, false), 2), 1);
                  }),
                  "not sealed against shrinking");
}

TEST(PythonEnvTest, AStartCheckWhoseResetNeverReturnsEndsAtItsDeadline) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), 1);
  config.options["hang_in_reset"] = "true";
  const auto start = std::chrono::steady_clock::now();
  const std::string e =
      error_of([&] { probe_python_env(config, std::chrono::milliseconds(1500)); });
  expect_contains(e, "reset did not return within 1 s");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Box(-0.1, 0.1, float64): float32 cannot hold 0.1; its bounds are rounded
// inward, so an action at a bound is in the env's own space.
TEST(PythonEnvTest, Float64ActionBoundsAreRoundedInward) {
  use_test_envs();
  auto env = PythonEnv::start(
      python_env("python:pronghorn_test_envs:make_bounded_walk", test_python(), 2), 1);
  ASSERT_EQ(env->spec().action_low.size(), 1u);
  EXPECT_GE(static_cast<double>(env->spec().action_low[0]), -0.1);
  EXPECT_LE(static_cast<double>(env->spec().action_high[0]), 0.1);
  Buffers b(env->spec(), 2);
  env->reset(b.obs.data());
  const std::vector<float> actions = {env->spec().action_low[0], env->spec().action_high[0]};
  env->step(actions.data(), b.out(false));
}

TEST(PythonEnvTest, AVectorEnvReturningTheWrongShapeIsNamed) {
  use_test_envs();
  auto env = PythonEnv::start(
      python_env("python:pronghorn_test_envs:make_scalar_reward_vector", test_python(), 2), 1);
  expect_contains(error_of_first_step(*env),
                  "step failed: ValueError: the env returned rewards of shape (), expected (2,)");
}

// Floats are never written into byte observations, whatever they hold.
TEST(PythonEnvTest, AVectorEnvSteppingFloatsIntoAByteSpaceIsNamed) {
  use_test_envs();
  auto env = PythonEnv::start(
      python_env("python:pronghorn_test_envs:make_float_frames_vector", test_python(), 2), 1);
  expect_contains(error_of_first_step(*env),
                  "step failed: ValueError: the env returned observations of float64, expected "
                  "uint8");
}

// `k` walks that raise at their second step.
EnvConfig walks_failing_at_step_2(int64_t k) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), k);
  config.options["fail_at"] = "2";
  config.options["length"] = "10";
  return config;
}

TEST(PythonEnvTest, AnExceptionInStepIsAnErrorWithItsLastLine) {
  auto env = PythonEnv::start(walks_failing_at_step_2(2), 1);
  Buffers b(env->spec(), 2);
  env->reset(b.obs.data());
  const std::vector<int32_t> right(2, 1);
  const StepOutput out = b.out(false);
  env->step(right.data(), out);
  const std::string e = error_of([&] { env->step(right.data(), out); });
  expect_contains(e, "env python:pronghorn_test_envs:make_walk");
  expect_contains(e, "step failed: ValueError: the walk fell off its line at step 2");
}

// With splits the actor sends a split's next step before it reads another's
// reply: a worker whose env raised answers each command in flight, and any
// after, with the env's line, not by closing its socket.
TEST(PythonEnvTest, AnExceptionWithSplitsInFlightIsTheEnvsLineForEachOfThem) {
  EnvConfig config = walks_failing_at_step_2(4);
  config.workers = 2;
  config.splits = 2;
  auto env = PythonEnv::start(config, 1);
  Buffers b(env->spec(), 4);
  env->reset(b.obs.data());
  const std::vector<int32_t> right(4, 1);
  const StepOutput out = b.out(false);
  const auto begin = [&](int64_t s) { env->begin_step(s, right.data() + 2 * s); };
  const auto finish = [&](int64_t s) { env->finish_step(s, rows_from(out, env->spec(), 2 * s)); };
  for (int64_t s : {0, 1}) begin(s);  // step 1 of each split
  for (int64_t s : {0, 1}) finish(s);
  for (int64_t s : {0, 1}) begin(s);  // step 2 of each, in flight at once
  const std::string line = "ValueError: the walk fell off its line at step 2";
  expect_contains(error_of([&] { finish(0); }), "step (split 0 of 2) failed: " + line);
  expect_contains(error_of([&] { finish(1); }), "step (split 1 of 2) failed: " + line);
  begin(0);
  expect_contains(error_of([&] { finish(0); }), "step (split 0 of 2) failed: " + line);
}

TEST(PythonEnvTest, AnEpisodeInfoValueThatIsNoNumberIsNamed) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_scored_walk", test_python(), 1);
  config.options["length"] = "1";
  config.options["score_as_text"] = "true";
  config.episode_info = {"score"};
  auto env = PythonEnv::start(config, 1);
  Buffers b(env->spec(), 1);
  env->reset(b.obs.data());
  const std::vector<int32_t> right(1, 1);
  std::vector<float> info(1);
  StepOutput out = b.out();
  out.episode_info = info.data();
  std::string e;
  for (int t = 0; t < 4 && e.empty(); ++t) e = error_of([&] { env->step(right.data(), out); });
  expect_contains(e, "env python:pronghorn_test_envs:make_scored_walk");
  expect_contains(e,
                  "step failed: ValueError: info['score'] of env 0 at its episode's end is "
                  "str, expected a number (env.episode_info)");
}

TEST(PythonEnvTest, EpisodeInfoOnAnEnvWithoutInfoIsRefused) {
  EnvConfig config;
  config.name = "cartpole";
  config.episode_info = {"score"};
  expect_contains(error_of([&] { make_env(config, 1); }),
                  "env.episode_info names 1 key(s), but env cartpole is a built-in env, which "
                  "has no info");
}

TEST(PythonEnvTest, AWorkerKilledFromOutsideIsNamed) {
  auto env = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python()), 1);
  expect_contains(
      error_of_first_step(*env, [&] { ASSERT_EQ(kill(env->worker_pids().front(), SIGKILL), 0); }),
      "was killed by SIGKILL during step");
}

// The env's option `option` = 1 in 2 (or `k`) envs of the test walk: its
// first step's error.
std::string walk_error(const std::string& option, int64_t k = 2) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), k);
  config.options[option] = "1";
  auto env = PythonEnv::start(config, 1);
  return error_of_first_step(*env);
}

TEST(PythonEnvTest, ACrashInsideTheEnvsCCodeIsNamed) {
  expect_contains(walk_error("crash_at"), "was killed by SIGSEGV during step");
}

TEST(PythonEnvTest, ANanRewardIsNamedByItsRow) {
  expect_contains(walk_error("nan_at", 3), "step returned reward NaN for env 0");
}

}  // namespace
}  // namespace pronghorn::envs
