#include "buffer/unroll_spec.h"

#include "core/error.h"
#include "core/fnv.h"

namespace pronghorn::buffer {
namespace {

constexpr size_t kAlign = 64;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Appends a field of `bytes` at the next aligned offset.
Field place(size_t& cursor, size_t bytes) {
  Field f{cursor, bytes};
  cursor = align_up(cursor + bytes);
  return f;
}

// The value's 8 bytes, least significant first (the same hash on any host).
void hash_in(uint64_t& h, uint64_t value) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  h = fnv1a(h, std::string_view(bytes, 8));
}

}  // namespace

SlotLayout slot_layout(const UnrollSpec& s) {
  PRONGHORN_CHECK(s.T >= 1 && s.T <= 1 << 16, "unroll spec: T = ", s.T, ": expected 1 to 65536");
  PRONGHORN_CHECK(s.K >= 1 && s.K <= 1 << 20, "unroll spec: K = ", s.K, ": expected 1 to 2^20");
  PRONGHORN_CHECK(!s.obs_shape.empty() && s.obs_shape.size() <= 4,
                  "unroll spec: obs_shape: expected 1 to 4 dimensions");
  size_t obs_elements = 1;
  for (int64_t d : s.obs_shape) {
    PRONGHORN_CHECK(d >= 1 && d <= 1 << 16, "unroll spec: obs_shape dimension ", d,
                    ": expected 1 to 65536");
    obs_elements *= static_cast<size_t>(d);
  }
  PRONGHORN_CHECK(s.action_dims >= 0 && s.action_dims <= 64,
                  "unroll spec: action_dims = ", s.action_dims, ": expected 0 to 64");
  PRONGHORN_CHECK(s.logits >= 0 && s.logits <= 1 << 16, "unroll spec: logits = ", s.logits,
                  ": expected 0 to 65536");
  PRONGHORN_CHECK(s.core_hidden >= 0 && s.core_hidden <= 1 << 16,
                  "unroll spec: core_hidden = ", s.core_hidden, ": expected 0 to 65536");
  PRONGHORN_CHECK(s.episode_info >= 0 && s.episode_info <= 64,
                  "unroll spec: episode_info = ", s.episode_info, ": expected 0 to 64");
  const size_t T = static_cast<size_t>(s.T), K = static_cast<size_t>(s.K);
  const size_t obs_item = dtype_bytes(s.obs_dtype);
  const size_t steps = T * K;
  SlotLayout l;
  size_t cursor = 0;
  l.obs = place(cursor, (T + 1) * K * obs_elements * obs_item);
  l.actions = place(cursor, steps * 4 * (s.action_dims == 0 ? 1 : s.action_dims));
  l.rewards = place(cursor, steps * 4);
  l.terminated = place(cursor, steps);
  l.truncated = place(cursor, steps);
  l.behaviour_log_probs = place(cursor, steps * 4);
  l.final_values = place(cursor, steps * 4);
  l.logits = place(cursor, steps * 4 * static_cast<size_t>(s.logits));
  l.core_state = place(cursor, 2 * K * 4 * static_cast<size_t>(s.core_hidden));
  l.episode_returns = place(cursor, steps * 4);
  l.episode_lengths = place(cursor, steps * 4);
  l.episode_info = place(cursor, steps * 4 * static_cast<size_t>(s.episode_info));
  l.bytes = cursor;
  PRONGHORN_CHECK(l.bytes <= (size_t{1} << 31), "unroll spec: a slot of ", l.bytes,
                  " bytes: expected at most 2 GiB");
  return l;
}

UnrollSpec unroll_spec_for(const EnvSpec& env, int64_t T, int64_t K) {
  UnrollSpec spec;
  spec.T = T;
  spec.K = K;
  spec.obs_shape = env.obs_shape;
  spec.obs_dtype = env.obs_dtype;
  spec.action_dims = env.action_kind == ActionKind::kContinuous ? env.action_size : 0;
  spec.episode_info = static_cast<int64_t>(env.episode_info.size());
  return spec;
}

UnrollSpec unroll_spec_for(const EnvSpec& env, const Config& config) {
  UnrollSpec spec = unroll_spec_for(env, config.actor.unroll_length, config.env.num_envs);
  if (config.model.core == ModelConfig::Core::kLstm) spec.core_hidden = config.model.core_hidden;
  return spec;
}

uint64_t spec_hash(const UnrollSpec& s) {
  uint64_t h = kFnv1aStart;
  hash_in(h, static_cast<uint64_t>(s.T));
  hash_in(h, static_cast<uint64_t>(s.K));
  hash_in(h, s.obs_shape.size());
  for (int64_t d : s.obs_shape) hash_in(h, static_cast<uint64_t>(d));
  hash_in(h, static_cast<uint64_t>(s.obs_dtype));
  hash_in(h, static_cast<uint64_t>(s.action_dims));
  hash_in(h, static_cast<uint64_t>(s.logits));
  hash_in(h, static_cast<uint64_t>(s.core_hidden));
  // Only when there are some, so the hashes of specs without stay as they were.
  if (s.episode_info > 0) hash_in(h, static_cast<uint64_t>(s.episode_info));
  return h;
}

}  // namespace pronghorn::buffer
