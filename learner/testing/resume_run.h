// A CartPole learner as `pronghorn train` builds it, a batch of random data
// for it, and the checkpoint it would write: what the resume tests
// (learner/resume_test.cpp, resume_statistics_test.cpp) start from.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "envs/env.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"
#include "learner/trainer.h"

namespace pronghorn::learner::testing {

inline std::string fresh_folder(const char* what) {
  std::string dir = ::testing::TempDir() + "/resume-" + std::to_string(getpid()) + "-" + what;
  std::filesystem::remove_all(dir);
  return dir;
}

// A CartPole learner on the CPU, as `pronghorn train` builds it.
struct Learner {
  Config config;
  envs::EnvSpec spec;
  Trainer trainer;
  explicit Learner(const std::vector<std::string>& overrides = {})
      : config(load_config("", with_cpu(overrides))),
        spec(envs::make_env(config.env, 0)->spec()),
        trainer(config, spec) {}
  static std::vector<std::string> with_cpu(std::vector<std::string> overrides) {
    overrides.push_back("learner.device=cpu");
    return overrides;
  }
  std::vector<float> weights() {
    std::vector<float> flat(trainer.model()->parameter_count());
    trainer.model()->write_flat(flat.data());
    return flat;
  }
};

// T = 4 steps of N = 8 envs of random CartPole-shaped data from `seed`.
inline Batch random_batch(uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t T = 4, N = 8;
  Batch b;
  b.obs = torch::randn({T + 1, N, 4});
  b.actions = torch::randint(0, 2, {T, N}, torch::kLong);
  b.rewards = torch::ones({T, N});
  b.discounts = torch::full({T, N}, 0.99f);
  b.truncated = torch::zeros({T, N}, torch::kByte);
  b.final_values = torch::zeros({T, N});
  b.behaviour_log_probs = torch::full({T, N}, std::log(0.5f));
  return b;
}

// The checkpoint `run` would write now, after `steps` learner steps.
inline Checkpoint snapshot(Learner& run, uint64_t steps) {
  Checkpoint c;
  c.counters = {steps * 100, steps, steps, steps + 1};
  c.parameters = run.weights();
  c.parameter_layout = parameter_layout(*run.trainer.model());
  c.optimizer = run.trainer.optimizer_state();
  at::Tensor state = at::detail::getDefaultCPUGenerator().get_state();
  c.rng.assign(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()), state.numel());
  return c;
}

}  // namespace pronghorn::learner::testing
