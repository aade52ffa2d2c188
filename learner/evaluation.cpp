#include "learner/evaluation.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "envs/env.h"
#include "model/policy_face.h"

namespace pronghorn::learner {
namespace {

constexpr int64_t kMaxEvalEnvs = 32;

void summarise(Evaluation& e) {
  if (e.returns.empty()) return;
  const double n = static_cast<double>(e.returns.size());
  e.mean = std::accumulate(e.returns.begin(), e.returns.end(), 0.0) / n;
  double squares = 0;
  for (double r : e.returns) squares += (r - e.mean) * (r - e.mean);
  e.std = std::sqrt(squares / n);
  e.min = *std::min_element(e.returns.begin(), e.returns.end());
  e.max = *std::max_element(e.returns.begin(), e.returns.end());
}

}  // namespace

Evaluation evaluate_policy(PolicyNet& model, const EnvConfig& env_config, int64_t episodes,
                           bool greedy, uint64_t seed, const std::atomic<bool>* cancel,
                           ModelConfig::FastPath fast_path) {
  EnvConfig config = env_config;
  config.num_envs = std::clamp<int64_t>(episodes, 1, kMaxEvalEnvs);
  auto env = envs::make_env(config, seed);
  const EnvSpec& spec = env->spec();
  const int64_t k = env->num_envs();
  const bool discrete = spec.action_kind == ActionKind::kDiscrete;
  torch::InferenceMode inference;
  const auto sampler_seed = static_cast<uint64_t>(
      at::randint(std::numeric_limits<int64_t>::max(), {1}, at::kLong).item<int64_t>());
  InferencePolicy policy(model, spec, k, fast_path, sampler_seed);  // a recurrent core per env

  std::vector<uint8_t> obs(spec.obs_bytes() * k);                           // [K, obs...]
  std::vector<float> rewards(k), continuous_actions(k * spec.action_size);  // [K], [K, D]
  std::vector<uint8_t> terminated(k), truncated(k);
  std::vector<int32_t> discrete_actions(k);
  std::vector<double> running(k, 0.0);
  std::vector<uint8_t> counted(k, 0);  // this env's episode of the round is in `returns`
  int64_t counted_this_round = 0;
  Evaluation e;
  env->reset(obs.data());
  while (static_cast<int64_t>(e.returns.size()) < episodes) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      e.cancelled = true;
      break;
    }
    const ActionsOut into{.discrete = discrete ? discrete_actions.data() : nullptr,
                          .clipped = discrete ? nullptr : continuous_actions.data()};
    policy.act(obs.data(), greedy, into);
    const void* actions =
        discrete ? static_cast<const void*>(discrete_actions.data()) : continuous_actions.data();
    env->step(actions, {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr});
    e.env_steps += static_cast<uint64_t>(k);
    for (int64_t i = 0; i < k; ++i) {
      running[i] += rewards[i];
      if ((terminated[i] || truncated[i]) && !counted[i]) {
        e.returns.push_back(running[i]);
        counted[i] = 1;
        ++counted_this_round;
      }
    }
    policy.reset_ended(terminated.data(), truncated.data());
    if (counted_this_round == k) {  // every env gave one: a fresh round of first episodes
      std::fill(counted.begin(), counted.end(), 0);
      std::fill(running.begin(), running.end(), 0.0);
      counted_this_round = 0;
      env->reset(obs.data());
      policy.reset();
    }
  }
  if (static_cast<int64_t>(e.returns.size()) > episodes) e.returns.resize(episodes);
  summarise(e);
  return e;
}

}  // namespace pronghorn::learner
