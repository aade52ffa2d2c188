// Python-hosted envs against Gymnasium itself: a plain Python loop in the
// same interpreter (tests/testing/gym_reference.py) and the env worker give
// the same bytes in a ring slot; and what a user's env can get wrong.
#include "envs/python_env.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "buffer/ring.h"
#include "buffer/slot_view.h"
#include "buffer/testing/names.h"
#include "core/error.h"
#include "core/testing/error_of.h"
#include "envs/testing/python_envs.h"

namespace pronghorn::envs {
namespace {

using pronghorn::testing::error_of;
using testing::python_version;
using testing::run_command;
using testing::test_python;

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos)
      << "\"" << message << "\" lacks \"" << part << "\"";
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The users' envs of envs/testing/python importable by every worker started after.
void use_test_envs() { setenv("PYTHONPATH", PRONGHORN_SOURCE_DIR "/envs/testing/python", 1); }

EnvConfig python_env(const std::string& name, const std::string& python, int64_t k = 4) {
  EnvConfig config;
  config.name = name;
  config.python = python;
  config.num_envs = k;
  return config;
}

struct Rollout {
  std::string env_id;
  int64_t k;
  int64_t steps;
  int64_t max_episode_steps;
  int min_terminations;  // each env's, at least (Pendulum never terminates)
  int min_truncations;
  int64_t workers = 1;  // env.workers
};

// Steps `rollout` through PythonEnv into one ring slot of `steps` steps, with
// the actions the reference drew, and compares every byte with the reference.
void expect_same_as_gymnasium(const std::string& python, const Rollout& r) {
  const uint64_t seed = 7;
  const std::string dir =
      ::testing::TempDir() + "gym-reference-" + r.env_id + "-" + python_version(python);
  const std::string options =
      "'{\"max_episode_steps\": " + std::to_string(r.max_episode_steps) + "}'";
  const auto reference =
      run_command(python + " " PRONGHORN_SOURCE_DIR "/tests/testing/gym_reference.py " + r.env_id +
                  " " + std::to_string(r.k) + " " + std::to_string(seed) + " " +
                  std::to_string(r.steps) + " " + options + " " + dir);
  ASSERT_EQ(reference.status, 0) << reference.out;
  int terminations = -1, truncations = -1;
  ASSERT_EQ(std::sscanf(reference.out.c_str(), "terminations %d truncations %d", &terminations,
                        &truncations),
            2);
  EXPECT_GE(terminations, r.min_terminations) << "the actions must end episodes both ways";
  EXPECT_GE(truncations, r.min_truncations);

  const bool envpool = r.env_id.starts_with("envpool:");
  EnvConfig config = python_env(envpool ? r.env_id : "gymnasium:" + r.env_id, python, r.k);
  config.max_episode_steps = r.max_episode_steps;
  config.workers = r.workers;
  auto env = PythonEnv::start(config, seed);
  ASSERT_EQ(env->worker_pids().size(), static_cast<size_t>(r.workers));
  const EnvSpec& spec = env->spec();
  const auto unroll = buffer::unroll_spec_for(spec, r.steps, r.k);
  auto ring = buffer::Ring::create(buffer::testing::unique_name("gym-" + r.env_id), unroll, 1);
  const auto slot = ring->claim(std::chrono::milliseconds(0));
  ASSERT_TRUE(slot);
  const buffer::SlotView out(ring->slot_data(*slot), ring->layout());

  const std::vector<uint8_t> actions = read_file(dir + "/actions.bin");
  const size_t row = spec.obs_bytes() * r.k, action_row = spec.action_bytes() * r.k;
  ASSERT_EQ(actions.size(), action_row * r.steps);
  std::vector<uint8_t> final_obs(row * r.steps, 0);
  env->reset(out.obs);
  for (int64_t t = 0; t < r.steps; ++t) {
    env->step(actions.data() + t * action_row,
              {out.obs + (t + 1) * row, out.rewards + t * r.k, out.terminated + t * r.k,
               out.truncated + t * r.k, final_obs.data() + t * row});
  }
  auto expect_bytes = [&](const char* name, const void* ours, size_t bytes) {
    const std::vector<uint8_t> theirs = read_file(dir + "/" + name + ".bin");
    ASSERT_EQ(theirs.size(), bytes) << name;
    EXPECT_EQ(std::memcmp(ours, theirs.data(), bytes), 0) << name << " differ from Gymnasium's";
  };
  expect_bytes("obs", out.obs, row * (r.steps + 1));
  expect_bytes("rewards", out.rewards, sizeof(float) * r.k * r.steps);
  expect_bytes("terminated", out.terminated, r.k * r.steps);
  expect_bytes("truncated", out.truncated, r.k * r.steps);
  expect_bytes("final_obs", final_obs.data(), final_obs.size());
  ring->abandon(*slot);
}

TEST(PythonEnvTest, CartPoleIsGymnasiumsBitForBit) {
  const std::string python = test_python();
  expect_same_as_gymnasium(python, {"CartPole-v1", 4, 300, 25, 2, 1});
}

TEST(PythonEnvTest, PendulumIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"Pendulum-v1", 4, 120, 50, 0, 2});
}

TEST(PythonEnvTest, LunarLanderIsGymnasiumsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"LunarLander-v3", 4, 800, 100, 2, 1});
}

// EnvPool resets an ended env on its next step; the worker's SAME_STEP
// vector over it must neither lose nor make up a transition.
TEST(PythonEnvTest, EnvPoolsCartPoleIsEnvPoolsBitForBit) {
  expect_same_as_gymnasium(test_python(), {"envpool:CartPole-v1", 4, 300, 25, 2, 1});
}

// An actor's envs split over several workers (8 over 3: 3, 3, 2), each
// env seeded as with one: the same bytes as the reference.
TEST(PythonEnvTest, SeveralWorkersStepTheSameEnvsAsOne) {
  expect_same_as_gymnasium(test_python(), {"CartPole-v1", 8, 200, 25, 1, 1, 3});
  expect_same_as_gymnasium(test_python(), {"envpool:CartPole-v1", 8, 200, 25, 1, 1, 2});
}

// Any CPython >= 3.10 the user names: one of another minor version than
// Debian's, with its own venv, where this machine has one.
TEST(PythonEnvTest, AnotherInterpretersCartPoleIsGymnasiumsBitForBit) {
  const std::string debian = python_version(test_python());
  for (const std::string& other : testing::other_pythons()) {
    const std::string version = python_version(other);
    if (version.empty() || version == debian || version < "3.10" || version.size() < 4) continue;
    const std::string python = test_python("--python " + other);
    ASSERT_EQ(python_version(python), version);
    expect_same_as_gymnasium(python, {"CartPole-v1", 4, 300, 25, 2, 1});
    return;
  }
  GTEST_SKIP() << "no CPython >= 3.10 other than Debian's " << debian
               << " on this machine (pythonX.Y on PATH or pyenv)";
}

TEST(PythonEnvTest, TheSpecComesFromTheSpaces) {
  auto cartpole = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python()), 1);
  EXPECT_EQ(cartpole->spec().obs_shape, std::vector<int64_t>{4});
  EXPECT_EQ(cartpole->spec().obs_dtype, Dtype::kFloat32);
  EXPECT_EQ(cartpole->spec().action_kind, ActionKind::kDiscrete);
  EXPECT_EQ(cartpole->spec().action_size, 2);
  EXPECT_EQ(cartpole->spec().max_episode_steps, 500);
  EXPECT_EQ(cartpole->spec().target_return, 475);
  auto pendulum = PythonEnv::start(python_env("gymnasium:Pendulum-v1", test_python()), 1);
  EXPECT_EQ(pendulum->spec().action_kind, ActionKind::kContinuous);
  EXPECT_EQ(pendulum->spec().action_low, std::vector<float>{-2});
  EXPECT_EQ(pendulum->spec().action_high, std::vector<float>{2});
}

// The files mapped into process `pid`: /proc/PID/maps's paths.
std::vector<std::string> mapped_files(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::vector<std::string> files;
  for (std::string line; std::getline(maps, line);) {
    if (const size_t slash = line.find('/'); slash != std::string::npos) {
      files.push_back(line.substr(slash));
    }
  }
  return files;
}

// The worker is the user's interpreter with the env's packages, nothing of ours.
TEST(PythonEnvTest, TheWorkerLoadsNoLibTorchAndNoPronghornCode) {
  auto env = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python()), 1);
  bool python = false, numpy = false;
  for (const std::string& file : mapped_files(env->worker_pids().front())) {
    const std::string name = file.substr(file.rfind('/') + 1);
    python |= name.starts_with("python3");
    numpy |= file.find("/numpy") != std::string::npos;
    EXPECT_FALSE(name.starts_with("libtorch") || name.starts_with("libc10")) << file;
    EXPECT_FALSE(name.starts_with("pronghorn") || name.starts_with("libpronghorn")) << file;
  }
  EXPECT_TRUE(python && numpy) << "not the worker's maps?";
}

TEST(PythonEnvTest, AUsersEnvThatImportsPyTorchWorks) {
  use_test_envs();
  auto env = PythonEnv::start(
      python_env("python:pronghorn_test_envs:make_torch_walk", test_python("--torch")), 3);
  std::vector<float> obs(2 * 4), rewards(4), final_obs(2 * 4);
  std::vector<uint8_t> terminated(4), truncated(4);
  env->reset(obs.data());
  const std::vector<int32_t> right(4, 1);
  env->step(right.data(),
            {obs.data(), rewards.data(), terminated.data(), truncated.data(), final_obs.data()});
  EXPECT_EQ(obs[1], 1.0f) << "the step count, computed by PyTorch";
  bool torch = false;
  for (const std::string& file : mapped_files(env->worker_pids().front())) {
    torch |= file.find("libtorch") != std::string::npos;
  }
  EXPECT_TRUE(torch) << "the user's PyTorch, loaded in the worker";
}

TEST(PythonEnvTest, OptionsAreTheEnvsKeywordArguments) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), 2);
  config.options["length"] = "2";
  auto env = PythonEnv::start(config, 5);
  std::vector<float> obs(4), rewards(2), final_obs(4);
  std::vector<uint8_t> terminated(2), truncated(2);
  env->reset(obs.data());
  const std::vector<int32_t> right(2, 1);
  for (int t = 0; t < 3 && terminated[0] == 0; ++t) {
    env->step(right.data(),
              {obs.data(), rewards.data(), terminated.data(), truncated.data(), final_obs.data()});
  }
  EXPECT_EQ(terminated[0], 1) << "length 2: the right end within 3 steps";
  EXPECT_EQ(final_obs[0], 2.0f);
}

TEST(PythonEnvTest, TheSameSeedGivesTheSameEpisodesAndAnotherSeedOthers) {
  auto first_obs = [](uint64_t seed) {
    auto env = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python(), 8), seed);
    std::vector<float> obs(4 * 8);
    env->reset(obs.data());
    return obs;
  };
  const std::vector<float> a = first_obs(11);
  EXPECT_EQ(first_obs(11), a);
  EXPECT_NE(first_obs(12), a);
  for (int i = 1; i < 8; ++i) {
    EXPECT_NE(std::vector<float>(a.begin() + 4 * i, a.begin() + 4 * i + 4),
              std::vector<float>(a.begin(), a.begin() + 4))
        << "env " << i << " starts where env 0 does";
  }
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
  for (const std::string& other : testing::other_pythons()) {
    const std::string version = python_version(other);
    if (version.empty() || (version >= "3.10" && version.size() >= 4)) continue;
    const std::string e = error_of<UsageError>(
        [&] { PythonEnv::start(python_env("gymnasium:CartPole-v1", other), 1); });
    expect_contains(e, "this is Python " + version + "; Python envs need 3.10 or newer");
    expect_contains(e, other);
    return;
  }
  GTEST_SKIP() << "no Python older than 3.10 on this machine (pythonX.Y on PATH or pyenv)";
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
  std::vector<float> obs(4), rewards(2);
  std::vector<uint8_t> terminated(2), truncated(2);
  env->reset(obs.data());
  const std::vector<float> actions = {env->spec().action_low[0], env->spec().action_high[0]};
  env->step(actions.data(),
            {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
}

TEST(PythonEnvTest, AVectorEnvReturningTheWrongShapeIsNamed) {
  use_test_envs();
  auto env = PythonEnv::start(
      python_env("python:pronghorn_test_envs:make_scalar_reward_vector", test_python(), 2), 1);
  std::vector<float> obs(4), rewards(2);
  std::vector<uint8_t> terminated(2), truncated(2);
  env->reset(obs.data());
  const std::vector<int32_t> actions(2, 0);
  expect_contains(error_of([&] {
                    env->step(actions.data(), {obs.data(), rewards.data(), terminated.data(),
                                               truncated.data(), nullptr});
                  }),
                  "step failed: ValueError: the env returned rewards of shape (), expected (2,)");
}

TEST(PythonEnvTest, AnExceptionInStepIsAnErrorWithItsLastLine) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), 2);
  config.options["fail_at"] = "2";
  config.options["length"] = "10";
  auto env = PythonEnv::start(config, 1);
  std::vector<float> obs(4), rewards(2);
  std::vector<uint8_t> terminated(2), truncated(2);
  env->reset(obs.data());
  const std::vector<int32_t> right(2, 1);
  const StepOutput out{obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr};
  env->step(right.data(), out);
  const std::string e = error_of([&] { env->step(right.data(), out); });
  expect_contains(e, "env python:pronghorn_test_envs:make_walk");
  expect_contains(e, "step failed: ValueError: the walk fell off its line at step 2");
}

TEST(PythonEnvTest, AWorkerKilledFromOutsideIsNamed) {
  auto env = PythonEnv::start(python_env("gymnasium:CartPole-v1", test_python()), 1);
  std::vector<float> obs(16), rewards(4);
  std::vector<uint8_t> terminated(4), truncated(4);
  env->reset(obs.data());
  ASSERT_EQ(kill(env->worker_pids().front(), SIGKILL), 0);
  const std::vector<int32_t> actions(4, 0);
  const std::string e = error_of([&] {
    env->step(actions.data(),
              {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
  });
  expect_contains(e, "was killed by SIGKILL during step");
}

TEST(PythonEnvTest, ACrashInsideTheEnvsCCodeIsNamed) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), 2);
  config.options["crash_at"] = "1";
  auto env = PythonEnv::start(config, 1);
  std::vector<float> obs(4), rewards(2);
  std::vector<uint8_t> terminated(2), truncated(2);
  env->reset(obs.data());
  const std::vector<int32_t> actions(2, 0);
  const std::string e = error_of([&] {
    env->step(actions.data(),
              {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
  });
  expect_contains(e, "was killed by SIGSEGV during step");
}

TEST(PythonEnvTest, ANanRewardIsNamedByItsRow) {
  use_test_envs();
  EnvConfig config = python_env("python:pronghorn_test_envs:make_walk", test_python(), 3);
  config.options["nan_at"] = "1";
  auto env = PythonEnv::start(config, 1);
  std::vector<float> obs(6), rewards(3);
  std::vector<uint8_t> terminated(3), truncated(3);
  env->reset(obs.data());
  const std::vector<int32_t> actions(3, 0);
  const std::string e = error_of([&] {
    env->step(actions.data(),
              {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
  });
  expect_contains(e, "step returned reward NaN for env 0");
}

}  // namespace
}  // namespace pronghorn::envs
