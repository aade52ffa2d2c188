#include "learner/batch.h"

#include <algorithm>

#include "buffer/slot_view.h"

namespace pronghorn::learner {
namespace {

// A tensor over slot memory, read-only in practice: at::cat copies it out.
at::Tensor view(const void* data, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  return at::from_blob(const_cast<void*>(data), shape, dtype);
}

}  // namespace

at::Tensor training_rewards(const at::Tensor& rewards, const LossConfig& loss) {
  at::Tensor r = rewards;
  if (loss.reward_clip > 0) r = r.clamp(-loss.reward_clip, loss.reward_clip);
  if (loss.reward_scale != 1.0) r = r * loss.reward_scale;
  return r;
}

Batch make_batch(const std::vector<buffer::TakenSlot>& taken, const buffer::SlotLayout& layout,
                 const EnvSpec& spec, const Config& config, uint64_t version) {
  const int64_t T = config.actor.unroll_length, K = config.env.num_envs;
  std::vector<int64_t> obs_shape = {T + 1, K};
  obs_shape.insert(obs_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  const bool continuous = spec.action_kind == ActionKind::kContinuous;
  std::vector<at::Tensor> obs, actions, rewards, terminated, truncated, final_values, behaviour,
      core_state;
  const int64_t H = config.model.core == ModelConfig::Core::kLstm ? config.model.core_hidden : 0;
  const size_t info = spec.episode_info.size();
  Batch b;
  for (const auto& s : taken) {
    const buffer::ConstSlotView slot(s.data, layout);
    obs.push_back(
        view(slot.obs, obs_shape, spec.obs_dtype == Dtype::kFloat32 ? at::kFloat : at::kByte));
    actions.push_back(continuous
                          ? view(slot.continuous_actions, {T, K, spec.action_size}, at::kFloat)
                          : view(slot.discrete_actions, {T, K}, at::kInt));
    rewards.push_back(view(slot.rewards, {T, K}, at::kFloat));
    terminated.push_back(view(slot.terminated, {T, K}, at::kByte));
    truncated.push_back(view(slot.truncated, {T, K}, at::kByte));
    final_values.push_back(view(slot.final_values, {T, K}, at::kFloat));
    behaviour.push_back(view(slot.behaviour_log_probs, {T, K}, at::kFloat));
    if (H > 0) core_state.push_back(view(slot.core_state, {2, K, H}, at::kFloat));
    b.episode_returns.insert(b.episode_returns.end(), slot.episode_returns,
                             slot.episode_returns + s.stamp.episodes);
    b.episode_lengths.insert(b.episode_lengths.end(), slot.episode_lengths,
                             slot.episode_lengths + s.stamp.episodes);
    b.episode_info.insert(b.episode_info.end(), slot.episode_info,
                          slot.episode_info + s.stamp.episodes * info);
    b.actors.push_back(s.stamp.actor);
    const uint64_t lag = version - std::min(version, s.stamp.policy_version);
    b.lag_sum += lag;
    b.lag_max = std::max(b.lag_max, lag);
    b.actor_env_s += s.stamp.env_us * 1e-6;
    b.actor_policy_s += s.stamp.policy_us * 1e-6;
    b.actor_wait_s += s.stamp.wait_us * 1e-6;
  }
  b.obs = at::cat(obs, 1);
  b.actions = at::cat(actions, 1);
  if (!continuous) b.actions = b.actions.to(at::kLong);
  b.rewards = training_rewards(at::cat(rewards, 1), config.loss);
  const at::Tensor all_terminated = at::cat(terminated, 1);
  b.discounts = config.loss.discount * (1 - all_terminated.to(at::kFloat));
  b.truncated = at::cat(truncated, 1);
  if (H > 0) {
    b.ended = all_terminated.bitwise_or(b.truncated);
    b.core_state = at::cat(core_state, 1);
  }
  b.final_values = at::cat(final_values, 1);
  b.behaviour_log_probs = at::cat(behaviour, 1);
  return b;
}

}  // namespace pronghorn::learner
