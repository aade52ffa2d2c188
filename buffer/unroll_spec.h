// The shape of one unroll (T steps of K envs from one actor with one policy
// version, docs/architecture.md §1) and the byte layout of a ring slot that holds it.
// Both sides compute the layout with slot_layout() from the same spec, so
// nothing is serialised per unroll; spec_hash() goes into the ring's header
// so an actor with another spec cannot attach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"

namespace pronghorn::buffer {

struct UnrollSpec {
  int64_t T = 0;                   // steps per unroll
  int64_t K = 0;                   // envs per actor
  std::vector<int64_t> obs_shape;  // one env's observation
  Dtype obs_dtype = Dtype::kFloat32;
  int64_t action_dims = 0;   // 0: discrete actions (int32); else float32 [dims]
  int64_t logits = 0;        // behaviour logits per step kept (0 = log-probs only)
  int64_t core_hidden = 0;   // the recurrent core's width H (0: feed-forward, no state)
  int64_t episode_info = 0;  // numbers an env reports per ended episode (EnvSpec::episode_info)
};

// One field of a slot: where it starts (from the slot base) and its size.
struct Field {
  size_t offset = 0;
  size_t bytes = 0;
};

// A slot, fields 64-byte aligned, in this order:
//   obs                [T+1, K, obs...]  obs_dtype; the last row bootstraps
//   actions            [T, K] int32, or [T, K, action_dims] float32
//   rewards            [T, K] float32
//   terminated         [T, K] uint8
//   truncated          [T, K] uint8
//   behaviour_log_probs[T, K] float32   log μ of the taken action
//   final_values       [T, K] float32   the actor's V of the final observation,
//                                       read only where truncated (docs/architecture.md §9)
//   logits             [T, K, logits] float32 (when logits > 0)
//   core_state         [2, K, H] float32 the core's h, then c, before step 0
//                                       (when core_hidden = H > 0)
//   episode_returns    [T·K] float32    finished episodes, in order
//   episode_lengths    [T·K] int32      (how many: the slot header's count)
//   episode_info       [T·K, episode_info] float32, the same episodes' numbers
//                                       (when episode_info > 0; NaN: none given)
struct SlotLayout {
  Field obs, actions, rewards, terminated, truncated, behaviour_log_probs, final_values, logits,
      core_state, episode_returns, episode_lengths, episode_info;
  size_t bytes = 0;  // the whole slot, a multiple of 64
};

// Throws pronghorn::Error naming the field when the spec is not usable.
SlotLayout slot_layout(const UnrollSpec& spec);

// FNV-1a over every field of the spec, in a fixed order.
uint64_t spec_hash(const UnrollSpec& spec);

// The unroll of T steps of K envs of `env`, with behaviour log-probs only.
UnrollSpec unroll_spec_for(const EnvSpec& env, int64_t T, int64_t K);
// The unroll a job's config makes: actor.unroll_length, env.num_envs,
// the env's episode_info and, with model.core = "lstm", the core's state.
UnrollSpec unroll_spec_for(const EnvSpec& env, const Config& config);

}  // namespace pronghorn::buffer
