// A Python-hosted env against its library's own loop (envs/python_env_test.cpp,
// envs/python_env_atari_test.cpp): tests/testing/gym_reference.py steps the
// library's envs in plain Python and the env worker steps the same envs, with
// the same actions, into one ring slot; every byte must be the same.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "buffer/ring.h"
#include "buffer/slot_view.h"
#include "buffer/testing/names.h"
#include "envs/python_env.h"
#include "envs/testing/python_envs.h"

namespace pronghorn::envs::testing {

struct Rollout {
  std::string env_id;
  int64_t k;
  int64_t steps;
  int64_t max_episode_steps;
  int min_terminations;  // each env's, at least (Pendulum never terminates)
  int min_truncations;
  int64_t workers = 1;  // env.workers
  // env.options beside max_episode_steps: name → a TOML value that is also JSON.
  std::map<std::string, std::string> options = {};
  uint64_t seed = 7;   // the actor's env seed
  int64_t splits = 1;  // env.splits: stepped in the overlapped order of actor/acting.h
};

// Steps `rollout` through PythonEnv into one ring slot of `steps` steps, with
// the actions the reference drew, and compares every byte with the reference.
inline void expect_same_as_gymnasium(const std::string& python, const Rollout& r) {
  const uint64_t seed = r.seed;
  // Per test: two tests may roll out one env id at once (ctest -j).
  const std::string dir = ::testing::TempDir() + "gym-reference-" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
                          python_version(python);
  std::string options;
  if (r.max_episode_steps > 0)
    options = "\"max_episode_steps\": " + std::to_string(r.max_episode_steps);
  for (const auto& [name, value] : r.options) {
    options += (options.empty() ? "\"" : ", \"") + name + "\": " + value;
  }
  options = "'{" + options + "}'";
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
  config.splits = r.splits;
  for (const auto& [name, value] : r.options) config.options[name] = value;
  auto env = PythonEnv::start(config, seed);
  std::string tag = r.env_id;  // a segment's name has no '/'
  std::replace(tag.begin(), tag.end(), '/', '-');
  ASSERT_EQ(env->worker_pids().size(), static_cast<size_t>(r.workers));
  const EnvSpec& spec = env->spec();
  const auto unroll = buffer::unroll_spec_for(spec, r.steps, r.k);
  auto ring = buffer::Ring::create(buffer::testing::unique_name("gym-" + tag), unroll, 1);
  const auto slot = ring->claim(std::chrono::milliseconds(0));
  ASSERT_TRUE(slot);
  const buffer::SlotView out(ring->slot_data(*slot), ring->layout());

  const std::vector<uint8_t> actions = read_file(dir + "/actions.bin");
  const size_t row = spec.obs_bytes() * r.k, action_row = spec.action_bytes() * r.k;
  ASSERT_EQ(actions.size(), action_row * r.steps);
  std::vector<uint8_t> final_obs(row * r.steps, 0);
  env->reset(out.obs);
  const auto into = [&](int64_t t) {
    return StepOutput{out.obs + (t + 1) * row, out.rewards + t * r.k, out.terminated + t * r.k,
                      out.truncated + t * r.k, final_obs.data() + t * row};
  };
  if (r.splits == 1) {
    for (int64_t t = 0; t < r.steps; ++t) env->step(actions.data() + t * action_row, into(t));
  } else {
    // As ActingLoop::run steps them: split s's step t + 1 begins once its
    // step t is done, while the splits after it still step.
    ASSERT_EQ(env->splits(), r.splits);
    const int64_t rows = env->split_rows();
    const auto begin = [&](int64_t s, int64_t t) {
      env->begin_step(s, actions.data() + t * action_row + s * rows * spec.action_bytes());
    };
    for (int64_t s = 0; s < r.splits; ++s) begin(s, 0);
    for (int64_t t = 0; t < r.steps; ++t) {
      for (int64_t s = 0; s < r.splits; ++s) {
        env->finish_step(s, rows_from(into(t), spec, s * rows));
        if (t + 1 < r.steps) begin(s, t + 1);
      }
    }
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
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);  // Atari's: 100 MB
}

}  // namespace pronghorn::envs::testing
