// One ring slot seen through its layout (buffer/unroll_spec.h): typed
// pointers to every field, for the actor that writes the slot and the learner
// that reads it, so neither decodes offsets by hand.
#pragma once

#include <cstdint>
#include <type_traits>

#include "buffer/unroll_spec.h"

namespace pronghorn::buffer {

// Byte is uint8_t for a writer's view, const uint8_t for a reader's.
template <typename Byte>
struct BasicSlotView {
  template <typename T>
  using Ptr = std::conditional_t<std::is_const_v<Byte>, const T*, T*>;

  Ptr<uint8_t> obs;                // [T+1, K, obs...] of the spec's obs dtype
  Ptr<int32_t> discrete_actions;   // [T, K]         } the same field: which one
  Ptr<float> continuous_actions;   // [T, K, dims]   } the spec's action_dims says
  Ptr<float> rewards;              // [T, K]
  Ptr<uint8_t> terminated;         // [T, K]
  Ptr<uint8_t> truncated;          // [T, K]
  Ptr<float> behaviour_log_probs;  // [T, K]
  Ptr<float> final_values;         // [T, K]
  Ptr<float> logits;               // [T, K, logits] when the spec keeps them
  Ptr<float> core_state;           // [2, K, H]: h, then c, before step 0 (recurrent cores)
  Ptr<float> episode_returns;      // [T·K], the stamp's `episodes` of them used
  Ptr<int32_t> episode_lengths;    // [T·K]
  Ptr<float> episode_info;         // [T·K, the spec's episode_info]

  BasicSlotView(Byte* base, const SlotLayout& layout)
      : obs(base + layout.obs.offset),
        discrete_actions(at<int32_t>(base, layout.actions)),
        continuous_actions(at<float>(base, layout.actions)),
        rewards(at<float>(base, layout.rewards)),
        terminated(base + layout.terminated.offset),
        truncated(base + layout.truncated.offset),
        behaviour_log_probs(at<float>(base, layout.behaviour_log_probs)),
        final_values(at<float>(base, layout.final_values)),
        logits(at<float>(base, layout.logits)),
        core_state(at<float>(base, layout.core_state)),
        episode_returns(at<float>(base, layout.episode_returns)),
        episode_lengths(at<int32_t>(base, layout.episode_lengths)),
        episode_info(at<float>(base, layout.episode_info)) {}

 private:
  // Fields are 64-byte aligned (slot_layout), so these casts are aligned.
  template <typename T>
  static Ptr<T> at(Byte* base, const Field& field) {
    return reinterpret_cast<Ptr<T>>(base + field.offset);
  }
};

using SlotView = BasicSlotView<uint8_t>;             // the actor's, writing
using ConstSlotView = BasicSlotView<const uint8_t>;  // the learner's, reading

}  // namespace pronghorn::buffer
