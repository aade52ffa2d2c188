#include "learner/run_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pronghorn::learner {
namespace {

void set_stage_times(const StageTimes& t, v1::StageTimes* out) {
  out->set_actor_env_s(t.actor_env_s);
  out->set_actor_policy_s(t.actor_policy_s);
  out->set_actor_wait_s(t.actor_wait_s);
  out->set_learner_wait_s(t.learner_wait_s);
  out->set_learner_batch_s(t.learner_batch_s);
  out->set_learner_forward_s(t.learner_forward_s);
  out->set_learner_backward_s(t.learner_backward_s);
  out->set_learner_optimizer_s(t.learner_optimizer_s);
  out->set_learner_publish_s(t.learner_publish_s);
  out->set_learner_allreduce_s(t.learner_allreduce_s);
}

}  // namespace

v1::Status make_status(const RunStats& stats, const LiveState& live) {
  v1::Status s;
  s.set_run_name(live.run_name);
  s.set_run_dir(live.run_dir);
  s.set_env_name(live.env_name);
  s.set_config_digest(live.config_digest);
  s.set_uptime_s(live.uptime_s);
  s.set_env_steps(stats.env_steps);
  s.set_sps(stats.sps);
  s.set_learner_steps_per_s(stats.learner_steps_per_s);
  s.set_learner_steps(stats.learner_steps);
  s.set_optimizer_steps(stats.optimizer_steps);
  s.set_policy_version(live.policy_version);
  s.set_episodes(stats.episodes);
  auto* returns = s.mutable_episode_return();
  returns->set_count(static_cast<uint32_t>(stats.recent.size()));
  if (!stats.recent.empty()) {
    returns->set_mean(stats.return_mean());
    returns->set_min(*std::min_element(stats.recent.begin(), stats.recent.end()));
    returns->set_max(*std::max_element(stats.recent.begin(), stats.recent.end()));
    s.set_episode_length_mean(stats.length_mean());
  }
  for (size_t i = 0; i < stats.episode_info_keys.size(); ++i) {
    const double mean = stats.episode_info_mean(i);
    if (!std::isnan(mean)) (*s.mutable_episode_info())[stats.episode_info_keys[i]] = mean;
  }
  auto* loss = s.mutable_loss();
  loss->set_total(stats.last.total);
  loss->set_policy(stats.last.policy);
  loss->set_value(stats.last.value);
  loss->set_entropy(stats.last.entropy);
  loss->set_clip_fraction(stats.last.clip_fraction);
  loss->set_approx_kl(stats.last.approx_kl);
  s.set_grad_norm(stats.last.grad_norm);
  s.set_learning_rate(stats.last.learning_rate);
  s.set_policy_lag_mean(stats.unrolls ? static_cast<double>(stats.lag_sum) / stats.unrolls : 0);
  s.set_policy_lag_max(stats.lag_max);
  s.set_ring_slots(live.ring_slots);
  s.set_ring_occupancy(static_cast<uint32_t>(live.ring.ready));
  s.set_unrolls_committed(live.ring.committed);
  s.set_unrolls_consumed(live.ring.consumed);
  s.set_unrolls_dropped_stale(live.ring.dropped_stale);
  s.set_unrolls_untrained(stats.untrained_unrolls);
  s.set_actors_alive(static_cast<uint32_t>(live.actors_alive));
  s.set_actors_desired(static_cast<uint32_t>(live.actors_desired));
  s.set_actor_restarts(live.actor_restarts);
  s.set_last_checkpoint_path(stats.last_checkpoint);
  s.set_last_checkpoint_unix_s(stats.last_checkpoint_unix_s);
  s.set_stopping(live.stopping);
  set_stage_times(stats.stage_time, s.mutable_stage_time());
  s.set_rank(live.rank);
  s.set_world_size(live.world_size);
  s.set_local_env_steps(stats.local_env_steps);
  s.set_node_name(live.node_name);
  s.set_allreduce_s(stats.last_allreduce_s);
  for (const v1::RankStatus& row : live.ranks) *s.add_ranks() = row;
  for (const v1::RemoteNode& node : live.remote_nodes) *s.add_remote_nodes() = node;
  s.set_remote_address(live.remote_address);
  s.set_total_steps(live.total_steps);
  s.set_target_return(live.target_return);
  s.set_state(live.state);
  s.set_end_reason(live.end_reason);
  s.set_health(live.health);
  s.set_eval_return_mean(stats.eval_return_mean);
  s.set_eval_return_std(stats.eval_return_std);
  s.set_eval_episodes(static_cast<uint32_t>(stats.eval_episodes));
  s.set_eval_env_steps(stats.eval_env_steps);
  return s;
}

std::vector<v1::RankStatus> make_rank_rows(const std::vector<RankRow>& rows,
                                           const std::vector<std::string>& nodes,
                                           const std::vector<std::string>& hosts) {
  std::vector<v1::RankStatus> out(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    v1::RankStatus& row = out[r];
    const RankRow& in = rows[r];
    row.set_rank(static_cast<uint32_t>(r));
    if (r < nodes.size()) row.set_node_name(nodes[r]);
    if (r < hosts.size() && !hosts[r].empty() && in.control_port != 0) {
      row.set_control_address(fmt::format("{}:{}", hosts[r], in.control_port));
    }
    row.set_sps(in.sps);
    row.set_local_env_steps(in.local_env_steps);
    row.set_actors_alive(in.actors_alive);
    row.set_actors_desired(in.actors_desired);
    row.set_ring_occupancy(in.ring_occupancy);
    row.set_allreduce_s(in.allreduce_s);
  }
  return out;
}

}  // namespace pronghorn::learner
