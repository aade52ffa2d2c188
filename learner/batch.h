// A learner's batch: B unrolls taken from the ring, as tensors [T+1, B·K]
// (docs/architecture.md §3), copied out of the slots so that the slots can be
// released before the learner step.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "buffer/ring.h"
#include "core/config.h"
#include "core/env_spec.h"

namespace pronghorn::learner {

// One copy per slot per field, by at::cat (docs/architecture.md §9).
struct Batch {
  at::Tensor obs;                                           // [T+1, N, obs...], N = B·K
  at::Tensor actions;                                       // [T, N] int64, or [T, N, D] float
  at::Tensor rewards, discounts;                            // [T, N]
  at::Tensor truncated, final_values, behaviour_log_probs;  // [T, N]
  // Recurrent cores only (undefined otherwise): where an episode ended
  // (terminated or truncated), [T, N] uint8, and the core's state before step
  // 0 as each actor stored it, h then c, [2, N, H] float32.
  at::Tensor ended, core_state;
  std::vector<float> episode_returns;    // of the episodes that ended in these unrolls
  std::vector<int32_t> episode_lengths;  // their lengths in env steps, in the same order
  // And their env.episode_info numbers, [episodes, spec.episode_info.size()]
  // row-major (NaN: the env gave none).
  std::vector<float> episode_info;
  std::vector<uint32_t> actors;       // each unroll's actor, in column order (K columns each)
  uint64_t lag_sum = 0, lag_max = 0;  // policy versions behind `version`
  double actor_env_s = 0, actor_policy_s = 0, actor_wait_s = 0;  // summed over the unrolls
};

// `b` with each of its defined tensors replaced by f(tensor) (a device move,
// a choice of columns); the other fields as they are.
template <typename F>
Batch map_tensors(const Batch& b, F&& f) {
  Batch m = b;
  for (at::Tensor* t : {&m.obs, &m.actions, &m.rewards, &m.discounts, &m.truncated, &m.final_values,
                        &m.behaviour_log_probs, &m.ended, &m.core_state}) {
    if (t->defined()) *t = f(*t);
  }
  return m;
}

// What the learner trains on of an env's `rewards`: clipped to
// ±loss.reward_clip (when > 0), then × loss.reward_scale (when not 1); never
// `rewards` changed in place.
at::Tensor training_rewards(const at::Tensor& rewards, const LossConfig& loss);

// Rewards are training_rewards() and discounts are γ·(1 − terminated).
Batch make_batch(const std::vector<buffer::TakenSlot>& taken, const buffer::SlotLayout& layout,
                 const EnvSpec& spec, const Config& config, uint64_t version);

}  // namespace pronghorn::learner
