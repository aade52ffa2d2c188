#include "actor/actor.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "actor/acting.h"
#include "buffer/process.h"
#include "buffer/ring.h"
#include "buffer/slot_view.h"
#include "buffer/weight_slab.h"
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

// Whether this actor should go on: not stopped, its learner alive.
bool should_run(const ActorOptions& o, const std::atomic<bool>& stop) {
  if (stop.load()) return false;
  if (o.learner_pid != 0 && !buffer::process_alive(o.learner_pid, 0)) {
    spdlog::info("learner {} is gone; actor {} exits", o.learner_pid, o.actor_id);
    return false;
  }
  return true;
}

// Waits until `slab` holds version `want` or newer; false when the actor
// should stop instead.
bool wait_for_version(const buffer::WeightSlab& slab, uint64_t want, const ActorOptions& o,
                      const std::atomic<bool>& stop) {
  for (uint64_t seen = slab.version(); seen < want; seen = slab.wait_newer(seen, 200ms)) {
    if (!should_run(o, stop)) return false;
  }
  return true;
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
  const EnvSpec spec = env->spec();
  auto ring = buffer::Ring::attach(o.ring, buffer::unroll_spec_for(spec, o.config));
  // The policy: its fused sampler seeded as LibTorch's generator is above, a
  // recurrent core's state carried across steps and unrolls.
  ActingLoop acting(std::move(env), PolicyNet(model_spec_for(spec, o.config.model)),
                    o.config.model.fast_path, sampling_seed);
  auto slab = buffer::WeightSlab::attach(o.slab, acting.published_count());
  std::vector<float> flat(acting.published_count());
  const size_t obs_row = spec.obs_bytes() * K;
  const bool continuous = spec.action_kind == ActionKind::kContinuous;
  const size_t info = spec.episode_info.size();

  std::vector<uint8_t> last_obs(obs_row);
  acting.reset(last_obs.data());
  uint64_t version = 0;
  const auto load_newest = [&] {
    version = slab->read(flat.data());
    acting.load(flat.data());
  };

  // run.deterministic (ActorOptions::lockstep_unrolls): the version group g
  // is acted with, base + max(0, g − 1), is read before the last unroll of
  // group g − 1 is committed. With learner.on_policy it is base + g, the
  // policy trained on group g − 1, read after that unroll is committed (the
  // learner cannot train without it).
  const uint64_t group = o.lockstep_unrolls;
  const uint64_t lag = o.config.learner.on_policy ? 0 : 1;
  uint64_t base = 0, committed = 0;
  bool lockstep_broken = false;
  if (group > 0) {
    if (!wait_for_version(*slab, 1, o, stop)) return;
    load_newest();
    base = version;
  }
  // Loads group g's version once `unrolls` = g · group are done; false when
  // the actor should stop instead. The wait is added to `waited`.
  const auto load_group_policy = [&](uint64_t unrolls, Clock::duration& waited) {
    const uint64_t want = base + unrolls / group - lag;
    const auto lockstep_start = Clock::now();
    if (!wait_for_version(*slab, want, o, stop)) return false;
    load_newest();
    waited += Clock::now() - lockstep_start;
    if (version != want && !std::exchange(lockstep_broken, true)) {
      // Only after a restart (this actor's or the learner's counting of it).
      spdlog::warn(
          "actor {} acts with policy version {} where {} was due: this run is no longer "
          "deterministic",
          o.actor_id, version, want);
    }
    return true;
  };
  Clock::duration on_policy_wait{};  // learner.on_policy: counted in the next unroll's stamp

  while (should_run(o, stop)) {
    const auto wait_start = Clock::now();
    if (group == 0 && slab->version() != version) load_newest();
    auto slot = ring->claim(500ms);
    if (!slot) continue;
    buffer::SlotStamp stamp{.policy_version = version, .actor = o.actor_id};
    Clock::duration env_time{}, policy_time{};
    Clock::duration wait_time = Clock::now() - wait_start + std::exchange(on_policy_wait, {});
    const buffer::SlotView out(ring->slot_data(*slot), ring->layout());
    uint8_t* obs = out.obs;
    uint32_t episodes = 0;
    const ActingLoop::EpisodeEnd record = [&](int64_t row, double episode_return, int32_t length) {
      out.episode_returns[episodes] = static_cast<float>(episode_return);
      out.episode_lengths[episodes] = length;
      std::copy_n(acting.episode_info(row), info, out.episode_info + episodes * info);
      ++episodes;
    };
    std::memcpy(obs, last_obs.data(), obs_row);  // row 0: where the last unroll left off
    acting.write_core_state(out.core_state);
    const ActingLoop::StepAt at = [&](int64_t t) {
      ActingLoop::Step step{
          .obs = obs + t * obs_row,
          .actions = {.log_probs = out.behaviour_log_probs + t * K},
          .into = {.env = {obs + (t + 1) * obs_row, out.rewards + t * K, out.terminated + t * K,
                           out.truncated + t * K, nullptr},
                   .final_values = out.final_values + t * K}};
      if (continuous) {
        step.actions.continuous = out.continuous_actions + t * K * spec.action_size;
      } else {
        step.actions.discrete = out.discrete_actions + t * K;
      }
      return step;
    };
    const ActingLoop::Run run =
        acting.run(T, /*greedy=*/false, at, record, [&] { return !stop.load(); });
    policy_time += run.times.policy;
    env_time += run.times.env;
    if (run.steps < T || stop.load()) {
      ring->abandon(*slot);
      return;
    }
    const bool group_done = group > 0 && (committed + 1) % group == 0;
    if (group_done && lag == 1 && !load_group_policy(committed + 1, wait_time)) {
      ring->abandon(*slot);
      return;
    }
    ++committed;
    std::memcpy(last_obs.data(), obs + T * obs_row, obs_row);
    stamp.episodes = episodes;
    stamp.env_us = microseconds(env_time);
    stamp.policy_us = microseconds(policy_time);
    stamp.wait_us = microseconds(wait_time);
    ring->commit(*slot, stamp);
    if (group_done && lag == 0 && !load_group_policy(committed, on_policy_wait)) return;
  }
}

}  // namespace pronghorn::actor
