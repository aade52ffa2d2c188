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
#include "buffer/slot_view.h"
#include "buffer/weight_slab.h"
#include "envs/env.h"
#include "model/policy_face.h"
#include "model/tensor_runtime.h"

namespace pronghorn::actor {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

uint32_t microseconds(Clock::duration d) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  return static_cast<uint32_t>(std::clamp<int64_t>(us, 0, UINT32_MAX));
}

}  // namespace

void run_actor(const ActorOptions& o, const std::atomic<bool>& stop) {
  keep_freed_memory_in_heap();
  set_compute_threads(static_cast<int>(o.config.actor.threads));
  // Every (rank, actor) its own streams: several learners' nodes must not
  // step the same episodes.
  const int64_t stream = static_cast<int64_t>(o.rank) * 1'000'003 + o.actor_id;
  const int64_t sampling_seed = o.config.run.seed * 7919 + stream;
  torch::manual_seed(sampling_seed);
  const int64_t T = o.config.actor.unroll_length, K = o.config.env.num_envs;
  auto env = envs::make_env(o.config.env, o.config.run.seed * 100003 + stream * 7 + 1);
  const EnvSpec& spec = env->spec();
  auto ring = buffer::Ring::attach(o.ring, buffer::unroll_spec_for(spec, o.config));
  // The policy: its fused sampler seeded as LibTorch's generator is above, a
  // recurrent core's state carried across steps and unrolls.
  InferencePolicy policy(PolicyNet(model_spec_for(spec, o.config.model)), spec, K,
                         o.config.model.fast_path, sampling_seed);
  auto slab = buffer::WeightSlab::attach(o.slab, policy.parameter_count());
  std::vector<float> flat(policy.parameter_count());
  const size_t obs_row = spec.obs_bytes() * K;
  const bool continuous = spec.action_kind == ActionKind::kContinuous;

  std::vector<uint8_t> last_obs(obs_row), final_obs(obs_row);
  std::vector<float> env_actions(continuous ? K * spec.action_size : 0);
  std::vector<float> running_return(K, 0.0f), final_values(K);
  std::vector<int32_t> running_length(K, 0);
  env->reset(last_obs.data());
  uint64_t version = 0;

  while (!stop.load()) {
    if (o.learner_pid != 0 && !buffer::process_alive(o.learner_pid, 0)) {
      spdlog::info("learner {} is gone; actor {} exits", o.learner_pid, o.actor_id);
      return;
    }
    const auto wait_start = Clock::now();
    if (slab->version() != version) {
      version = slab->read(flat.data());
      policy.load(flat.data());
    }
    auto slot = ring->claim(500ms);
    if (!slot) continue;
    buffer::SlotStamp stamp{.policy_version = version, .actor = o.actor_id};
    Clock::duration env_time{}, policy_time{};
    const Clock::duration wait_time = Clock::now() - wait_start;
    const buffer::SlotView out(ring->slot_data(*slot), ring->layout());
    uint8_t* obs = out.obs;
    float* rewards = out.rewards;
    uint8_t* terminated = out.terminated;
    uint8_t* truncated = out.truncated;
    uint32_t episodes = 0;
    std::memcpy(obs, last_obs.data(), obs_row);  // row 0: where the last unroll left off
    policy.write_core_state(out.core_state);
    bool stopped = false;
    for (int64_t t = 0; t < T && !stopped; ++t) {
      const auto policy_start = Clock::now();
      ActionsOut actions{.log_probs = out.behaviour_log_probs + t * K};
      if (continuous) {
        actions.continuous = out.continuous_actions + t * K * spec.action_size;
        actions.clipped = env_actions.data();
      } else {
        actions.discrete = out.discrete_actions + t * K;
      }
      policy.act(obs + t * obs_row, /*greedy=*/false, actions);
      const void* step_actions =
          continuous ? static_cast<const void*>(env_actions.data()) : actions.discrete;
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
          out.episode_returns[episodes] = running_return[k];
          out.episode_lengths[episodes] = running_length[k];
          ++episodes;
          running_return[k] = 0;
          running_length[k] = 0;
        }
      }
      // V of the final observation where a time limit cut the episode
      // (docs/architecture.md §9): the learner bootstraps from it.
      std::memset(out.final_values + t * K, 0, sizeof(float) * K);
      const auto env_end = Clock::now();
      env_time += env_end - env_start;
      if (any_truncated) {
        // From the core's state after this step, before the reset: the
        // final observation continues the episode that was cut.
        policy.values(final_obs.data(), final_values.data());
        for (int64_t k = 0; k < K; ++k) {
          if (truncated[t * K + k]) out.final_values[t * K + k] = final_values[k];
        }
        policy_time += Clock::now() - env_end;
      }
      policy.reset_ended(terminated + t * K, truncated + t * K);
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
