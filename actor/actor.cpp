#include "actor/actor.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "buffer/process.h"
#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "core/model.h"
#include "core/tensor_runtime.h"
#include "envs/env.h"

namespace pronghorn::actor {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

uint32_t microseconds(Clock::duration d) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(us, 0, UINT32_MAX));
}

// Samples one action per row of logits; writes actions and their log-probs.
void sample_discrete(const at::Tensor& logits, int32_t* actions, float* log_probs) {
  at::Tensor log_p = at::log_softmax(logits, -1);
  at::Tensor taken = at::multinomial(log_p.exp(), 1).squeeze(-1);  // [K]
  at::Tensor lp = log_p.gather(-1, taken.unsqueeze(-1)).squeeze(-1);
  at::Tensor taken32 = taken.to(at::kInt);
  std::memcpy(actions, taken32.data_ptr<int32_t>(), sizeof(int32_t) * taken32.numel());
  std::memcpy(log_probs, lp.data_ptr<float>(), sizeof(float) * lp.numel());
}

// Gaussian: samples, clips to the env's bounds for stepping, and records the
// unclipped sample's log-prob (what the learner recomputes).
void sample_gaussian(const PolicyOutput& out, const envs::EnvSpec& spec, float* actions,
                     float* env_actions, float* log_probs) {
  at::Tensor a = out.logits + out.log_std.exp() * at::randn_like(out.logits);
  at::Tensor lp = gaussian_log_prob(a, out.logits, out.log_std);
  const int64_t n = a.numel(), dims = spec.action_size;
  std::memcpy(actions, a.contiguous().data_ptr<float>(), sizeof(float) * n);
  std::memcpy(log_probs, lp.data_ptr<float>(), sizeof(float) * lp.numel());
  for (int64_t i = 0; i < n; ++i) {
    env_actions[i] = std::clamp(actions[i], spec.action_low[i % dims], spec.action_high[i % dims]);
  }
}

}  // namespace

void run_actor(const ActorOptions& o, const std::atomic<bool>& stop) {
  keep_freed_memory_in_heap();
  set_compute_threads(static_cast<int>(o.config.actor.threads));
  torch::manual_seed(o.config.run.seed * 7919 + o.actor_id);
  const int64_t T = o.config.actor.unroll_length, K = o.config.env.num_envs;
  auto env = envs::make_env(o.config.env, o.config.run.seed * 100003 + o.actor_id * 7 + 1);
  const envs::EnvSpec& spec = env->spec();
  auto ring = buffer::Ring::attach(o.ring, buffer::unroll_spec_for(spec, T, K));
  PolicyNet model(model_spec_for(spec, o.config.model));
  auto slab = buffer::WeightSlab::attach(o.slab, model->parameter_count());
  std::vector<float> flat(model->parameter_count());
  const buffer::SlotLayout& layout = ring->layout();
  const size_t obs_row = spec.obs_bytes() * K;
  const bool continuous = spec.action_kind == envs::ActionKind::kContinuous;
  const auto obs_dtype = spec.obs_dtype == envs::Dtype::kFloat32 ? at::kFloat : at::kByte;
  std::vector<int64_t> obs_batch_shape = {K};
  obs_batch_shape.insert(obs_batch_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());

  std::vector<uint8_t> last_obs(obs_row), final_obs(obs_row);
  std::vector<float> env_actions(continuous ? K * spec.action_size : 0);
  std::vector<float> running_return(K, 0.0f);
  std::vector<int32_t> running_length(K, 0);
  env->reset(last_obs.data());
  uint64_t version = 0;
  torch::InferenceMode inference;

  while (!stop.load()) {
    if (o.learner_pid != 0 && !buffer::process_alive(o.learner_pid, 0)) {
      spdlog::info("learner {} is gone; actor {} exits", o.learner_pid, o.actor_id);
      return;
    }
    const auto wait_start = Clock::now();
    if (slab->version() != version) {
      version = slab->read(flat.data());
      model->read_flat(flat.data());
    }
    auto slot = ring->claim(500ms);
    if (!slot) continue;
    buffer::SlotStamp stamp{.policy_version = version, .actor = o.actor_id};
    Clock::duration env_time{}, policy_time{};
    const Clock::duration wait_time = Clock::now() - wait_start;
    uint8_t* base = ring->slot_data(*slot);
    uint8_t* obs = base + layout.obs.offset;
    auto* rewards = reinterpret_cast<float*>(base + layout.rewards.offset);
    auto* terminated = base + layout.terminated.offset;
    auto* truncated = base + layout.truncated.offset;
    auto* log_probs = reinterpret_cast<float*>(base + layout.behaviour_log_probs.offset);
    auto* final_values = reinterpret_cast<float*>(base + layout.final_values.offset);
    auto* episode_returns = reinterpret_cast<float*>(base + layout.episode_returns.offset);
    auto* episode_lengths = reinterpret_cast<int32_t*>(base + layout.episode_lengths.offset);
    uint32_t episodes = 0;
    std::memcpy(obs, last_obs.data(), obs_row);  // row 0: where the last unroll left off
    bool stopped = false;
    for (int64_t t = 0; t < T && !stopped; ++t) {
      const auto policy_start = Clock::now();
      at::Tensor x = at::from_blob(obs + t * obs_row, obs_batch_shape, obs_dtype);
      PolicyOutput out = model->forward(x);
      void* step_actions;
      if (continuous) {
        auto* a = reinterpret_cast<float*>(base + layout.actions.offset) + t * K * spec.action_size;
        sample_gaussian(out, spec, a, env_actions.data(), log_probs + t * K);
        step_actions = env_actions.data();
      } else {
        auto* a = reinterpret_cast<int32_t*>(base + layout.actions.offset) + t * K;
        sample_discrete(out.logits, a, log_probs + t * K);
        step_actions = a;
      }
      const auto env_start = Clock::now();
      policy_time += env_start - policy_start;
      env->step(step_actions, {obs + (t + 1) * obs_row, rewards + t * K, terminated + t * K,
                               truncated + t * K, final_obs.data()});
      bool any_truncated = false;
      for (int64_t k = 0; k < K; ++k) {
        running_return[k] += rewards[t * K + k];
        running_length[k] += 1;
        any_truncated |= truncated[t * K + k] != 0;
        if (terminated[t * K + k] || truncated[t * K + k]) {
          episode_returns[episodes] = running_return[k];
          episode_lengths[episodes] = running_length[k];
          ++episodes;
          running_return[k] = 0;
          running_length[k] = 0;
        }
      }
      // V of the final observation where a time limit cut the episode
      // (DESIGN.md §9): the learner bootstraps from it.
      std::memset(final_values + t * K, 0, sizeof(float) * K);
      const auto env_end = Clock::now();
      env_time += env_end - env_start;
      if (any_truncated) {
        at::Tensor v = model->forward(at::from_blob(final_obs.data(), obs_batch_shape, obs_dtype))
                           .value.contiguous();
        const float* value = v.data_ptr<float>();
        for (int64_t k = 0; k < K; ++k) {
          if (truncated[t * K + k]) final_values[t * K + k] = value[k];
        }
        policy_time += Clock::now() - env_end;
      }
      stopped = stop.load();
    }
    if (stopped) {
      ring->abandon(*slot);
      return;
    }
    std::memcpy(last_obs.data(), obs + T * obs_row, obs_row);
    stamp.episodes = episodes;
    stamp.env_us = microseconds(env_time);
    stamp.policy_us = microseconds(policy_time);
    stamp.wait_us = microseconds(wait_time);
    ring->commit(*slot, stamp);
  }
}

}  // namespace pronghorn::actor
