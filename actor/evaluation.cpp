#include "actor/evaluation.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "actor/acting.h"
#include "core/error.h"
#include "envs/env.h"

namespace pronghorn::actor {

void summarise(Evaluation& e) {
  e.mean = e.std = e.min = e.max = 0;
  if (e.returns.empty()) return;
  const double n = static_cast<double>(e.returns.size());
  e.mean = std::accumulate(e.returns.begin(), e.returns.end(), 0.0) / n;
  double squares = 0;
  for (double r : e.returns) squares += (r - e.mean) * (r - e.mean);
  e.std = std::sqrt(squares / n);
  e.min = *std::min_element(e.returns.begin(), e.returns.end());
  e.max = *std::max_element(e.returns.begin(), e.returns.end());
}

std::unique_ptr<ActingLoop> evaluation_loop(PolicyNet& model, const EnvConfig& env_config,
                                            uint64_t seed, ModelConfig::FastPath fast_path) {
  const auto sampler_seed = static_cast<uint64_t>(
      at::randint(std::numeric_limits<int64_t>::max(), {1}, at::kLong).item<int64_t>());
  EnvConfig config = env_config;
  config.splits = 1;  // any number of envs; an evaluation is not timed
  return std::make_unique<ActingLoop>(envs::make_env(config, seed), model, fast_path, sampler_seed);
}

Evaluation evaluate_policy(PolicyNet& model, const EnvConfig& env_config, int64_t episodes,
                           bool greedy, uint64_t seed, const std::atomic<bool>* cancel,
                           ModelConfig::FastPath fast_path) {
  EnvConfig config = env_config;
  config.num_envs = evaluation_envs(episodes);
  torch::InferenceMode inference;
  const std::unique_ptr<ActingLoop> loop = evaluation_loop(model, config, seed, fast_path);
  ActingLoop& acting = *loop;
  const EnvSpec& spec = acting.spec();
  const int64_t k = acting.num_envs();
  const bool discrete = spec.action_kind == ActionKind::kDiscrete;

  std::vector<uint8_t> obs(spec.obs_bytes() * k);  // [K, obs...], stepped in place
  std::vector<float> rewards(k);
  std::vector<uint8_t> terminated(k), truncated(k);
  std::vector<int32_t> discrete_actions(discrete ? k : 0);
  // The episodes counted are the first `episodes` to start, whatever their
  // lengths: whether one counts is settled as it starts, before its length
  // is known (counting those that end first would favour the short ones).
  // An env whose episode ends starts a counted one while fewer have
  // started, else steps on uncounted until the last counted one ends.
  std::vector<uint8_t> counting(k, 1);  // env i's episode under way is counted
  int64_t started = k;                  // K ≤ episodes (evaluation_envs)
  Evaluation e;
  const ActingLoop::EpisodeEnd count = [&](int64_t env, double episode_return, int32_t length) {
    if (!counting[env]) return;
    e.returns.push_back(episode_return);
    e.lengths.push_back(length);
    counting[env] = started < episodes ? 1 : 0;
    started += counting[env];
  };
  const ActingLoop::StepInto into{
      .env = {obs.data(), rewards.data(), terminated.data(), truncated.data(), nullptr}};
  acting.reset(obs.data());
  while (static_cast<int64_t>(e.returns.size()) < episodes) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      e.cancelled = true;
      break;
    }
    // The env reads the actions before it writes the next observations.
    acting.step(obs.data(), greedy, {.discrete = discrete ? discrete_actions.data() : nullptr},
                into, count);
    e.env_steps += static_cast<uint64_t>(k);
  }
  summarise(e);
  return e;
}

std::string format_evaluation(const Evaluation& e) {
  std::string text = fmt::format("env_steps {}\ncancelled {}\n", e.env_steps, e.cancelled ? 1 : 0);
  for (double r : e.returns) text += fmt::format("return {:.17g}\n", r);
  return text;
}

Evaluation parse_evaluation(const std::string& text) {
  Evaluation e;
  std::istringstream in(text);
  std::string key, cancelled;
  PRONGHORN_CHECK((in >> key >> e.env_steps) && key == "env_steps" && (in >> key >> cancelled) &&
                      key == "cancelled" && (cancelled == "0" || cancelled == "1"),
                  "evaluation result: no \"env_steps N\" and \"cancelled 0|1\" lines");
  e.cancelled = cancelled == "1";
  double r = 0;
  while (in >> key >> r) {
    PRONGHORN_CHECK(key == "return", "evaluation result: \"", key, "\" where a return was due");
    e.returns.push_back(r);
  }
  PRONGHORN_CHECK(in.eof(), "evaluation result: a return that is not a number");
  summarise(e);
  return e;
}

}  // namespace pronghorn::actor
