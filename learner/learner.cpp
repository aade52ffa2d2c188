#include "learner/learner.h"

#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>
#include <unistd.h>

#include <sys/mman.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <sstream>
#include <fstream>
#include <numeric>
#include <thread>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "core/model.h"
#include "envs/env.h"
#include "kernels/losses.h"
#include "kernels/vtrace.h"
#include "buffer/process.h"
#include "core/error.h"
#include "learner/checkpoint.h"
#include "learner/curves.h"
#include "learner/supervisor.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// One batch of B unrolls as tensors over the ring's slots (one copy per slot
// per field, by at::cat; DESIGN.md §9).
struct Batch {
  at::Tensor obs;                  // [T+1, N, obs...], N = B·K
  at::Tensor actions;              // [T, N] int64, or [T, N, D] float
  at::Tensor rewards, discounts;   // [T, N]
  at::Tensor truncated, final_values, behaviour_log_probs;  // [T, N]
  std::vector<float> episode_returns;
  uint64_t lag_sum = 0, lag_max = 0;
};

Batch make_batch(const std::vector<buffer::TakenSlot>& taken, const buffer::SlotLayout& layout,
                 const envs::EnvSpec& spec, int64_t T, int64_t K, double discount,
                 uint64_t version) {
  auto field = [&](const buffer::TakenSlot& s, const buffer::Field& f, std::vector<int64_t> shape,
                   at::ScalarType dtype) {
    return at::from_blob(const_cast<uint8_t*>(s.data) + f.offset, shape, dtype);
  };
  std::vector<int64_t> obs_shape = {T + 1, K};
  obs_shape.insert(obs_shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  const bool continuous = spec.action_kind == envs::ActionKind::kContinuous;
  std::vector<at::Tensor> obs, actions, rewards, terminated, truncated, final_values, behaviour;
  Batch b;
  for (const auto& s : taken) {
    obs.push_back(field(s, layout.obs, obs_shape,
                        spec.obs_dtype == envs::Dtype::kFloat32 ? at::kFloat : at::kByte));
    actions.push_back(continuous ? field(s, layout.actions, {T, K, spec.action_size}, at::kFloat)
                                 : field(s, layout.actions, {T, K}, at::kInt));
    rewards.push_back(field(s, layout.rewards, {T, K}, at::kFloat));
    terminated.push_back(field(s, layout.terminated, {T, K}, at::kByte));
    truncated.push_back(field(s, layout.truncated, {T, K}, at::kByte));
    final_values.push_back(field(s, layout.final_values, {T, K}, at::kFloat));
    behaviour.push_back(field(s, layout.behaviour_log_probs, {T, K}, at::kFloat));
    const auto* returns = reinterpret_cast<const float*>(s.data + layout.episode_returns.offset);
    b.episode_returns.insert(b.episode_returns.end(), returns, returns + s.stamp.episodes);
    const uint64_t lag = version - std::min(version, s.stamp.policy_version);
    b.lag_sum += lag;
    b.lag_max = std::max(b.lag_max, lag);
  }
  b.obs = at::cat(obs, 1);
  b.actions = at::cat(actions, 1);
  if (!continuous) b.actions = b.actions.to(at::kLong);
  b.rewards = at::cat(rewards, 1);
  b.discounts = discount * (1 - at::cat(terminated, 1).to(at::kFloat));
  b.truncated = at::cat(truncated, 1);
  b.final_values = at::cat(final_values, 1);
  b.behaviour_log_probs = at::cat(behaviour, 1);
  return b;
}

struct StepStats {
  double total = 0, policy = 0, value = 0, entropy = 0, grad_norm = 0;
};

class Trainer {
 public:
  explicit Trainer(const Config& c, const envs::EnvSpec& spec)
      : c_(c), model_(model_spec_for(spec, c.model)),
        continuous_(spec.action_kind == envs::ActionKind::kContinuous),
        use_gae_(c.loss.kind == "ppo" && c.loss.advantages == "gae") {
    vtrace_params_ = {static_cast<float>(c.loss.rho_bar), static_cast<float>(c.loss.c_bar),
                      static_cast<float>(c.loss.rho_pg_bar), static_cast<float>(c.loss.gae_lambda)};
    loss_options_.kind = c.loss.kind == "ppo" ? kernels::LossKind::kPpo : kernels::LossKind::kImpala;
    loss_options_.baseline_cost = static_cast<float>(c.loss.baseline_cost);
    loss_options_.entropy_cost = static_cast<float>(c.loss.entropy_cost);
    loss_options_.ppo_clip = static_cast<float>(c.loss.ppo_clip);
    loss_options_.mean_reduction = c.loss.reduction == "mean";
    const double lr = c.learner.learning_rate;
    if (c.learner.optimizer == "rmsprop") {
      optimizer_ = std::make_unique<torch::optim::RMSprop>(
          model_->parameters(),
          torch::optim::RMSpropOptions(lr).alpha(c.learner.rmsprop_alpha).eps(c.learner.adam_eps));
    } else {
      optimizer_ = std::make_unique<torch::optim::Adam>(
          model_->parameters(), torch::optim::AdamOptions(lr).eps(c.learner.adam_eps));
    }
  }

  PolicyNet& model() { return model_; }

  std::string optimizer_state() {
    torch::serialize::OutputArchive archive;
    optimizer_->save(archive);
    std::ostringstream out;
    archive.save_to(out);
    return out.str();
  }

  void load_optimizer_state(const std::string& state) {
    torch::serialize::InputArchive archive;
    std::istringstream in(state);
    archive.load_from(in);
    optimizer_->load(archive);
  }

  StepStats learn(const Batch& b, double progress) {
    const int64_t T = b.rewards.size(0), N = b.rewards.size(1);
    PolicyOutput out = model_->forward(b.obs.flatten(0, 1));  // [(T+1)·N, obs...]
    at::Tensor logits = out.logits.view({T + 1, N, -1});
    at::Tensor values = out.value.view({T + 1, N});
    at::Tensor head = logits.slice(0, 0, T);
    at::Tensor v = values.slice(0, 0, T);
    const kernels::Truncation truncation{b.truncated, b.final_values};
    const kernels::VtraceParams& vp = vtrace_params_;
    // Gaussian heads: the log-std of steps 0 … T−1, [T, N, D].
    at::Tensor log_std =
        continuous_ ? out.log_std.view({T + 1, N, -1}).slice(0, 0, T) : at::Tensor();
    at::Tensor advantages, targets;
    {
      at::NoGradGuard no_grad;
      at::Tensor bootstrap = values[T].detach();
      if (continuous_) {
        at::Tensor z = (b.actions - head) / log_std.exp();
        at::Tensor log_pi = (-0.5 * z * z - log_std - 0.9189385332046727).sum(-1);
        at::Tensor log_rhos = (log_pi - b.behaviour_log_probs).detach();
        auto r = kernels::vtrace_from_log_rhos(log_rhos, b.discounts, b.rewards, v.detach(),
                                               bootstrap, vp, truncation);
        advantages = r.pg_advantages, targets = r.vs;
      } else if (use_gae_) {
        auto r = kernels::gae_from_logits(head.detach(), b.actions, b.behaviour_log_probs,
                                          b.discounts, b.rewards, v.detach(), bootstrap, vp,
                                          truncation);
        advantages = r.advantages, targets = r.returns;
      } else {
        auto r = kernels::vtrace_from_logits(head.detach(), b.actions, b.behaviour_log_probs,
                                             b.discounts, b.rewards, v.detach(), bootstrap, vp,
                                             truncation);
        advantages = r.pg_advantages, targets = r.vs;
      }
    }
    kernels::LossResult loss =
        continuous_ ? kernels::gaussian_loss(head, log_std, v, b.actions, b.behaviour_log_probs,
                                             advantages, targets, loss_options_)
                    : kernels::categorical_loss(head, v, b.actions, b.behaviour_log_probs,
                                                advantages, targets, loss_options_);
    optimizer_->zero_grad();
    loss.total.backward();
    StepStats s;
    s.grad_norm = c_.learner.max_grad_norm > 0
                      ? torch::nn::utils::clip_grad_norm_(model_->parameters(),
                                                          c_.learner.max_grad_norm)
                      : 0.0;
    const double lr = c_.learner.learning_rate *
                      (c_.learner.lr_schedule == "linear" ? std::max(0.0, 1.0 - progress) : 1.0);
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
    optimizer_->step();
    s.total = loss.total.item<double>();
    s.policy = loss.policy.item<double>();
    s.value = loss.value.item<double>();
    s.entropy = loss.entropy.item<double>();
    return s;
  }

 private:
  Config c_;
  PolicyNet model_;
  bool continuous_;  // Gaussian head
  bool use_gae_;     // PPO on GAE(λ) advantages instead of V-trace
  kernels::VtraceParams vtrace_params_;
  kernels::LossOptions loss_options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

// Removes shared memory left by an earlier learner of this run that died
// (names carry the learner's pid: /pronghorn-<run>-<pid>-ring|slab).
void remove_stale_segments(const std::string& run) {
  const std::string prefix = "pronghorn-" + run + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = entry.path().filename();
    if (name.rfind(prefix, 0) != 0) continue;
    const int pid = std::atoi(name.c_str() + prefix.size());
    if (pid > 0 && !buffer::process_alive(pid, 0)) {
      spdlog::info("removing stale shared memory /{} of a dead learner", name);
      shm_unlink(("/" + name).c_str());
    }
  }
}

int actor_count(const Config& c) {
  if (c.actor.count > 0) return static_cast<int>(c.actor.count);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<int>(std::max(1L, cores - 1));  // the learner keeps one core
}

}  // namespace

TrainResult train(const TrainOptions& o, const std::atomic<bool>& stop) {
  const Config& c = o.config;
  const int64_t T = c.actor.unroll_length, K = c.env.num_envs, B = c.learner.batch_size;
  at::set_num_threads(c.learner.threads > 0 ? static_cast<int>(c.learner.threads) : 1);
  torch::manual_seed(c.run.seed);
  const envs::EnvSpec spec = envs::make_env([&] {
    EnvConfig one = c.env;
    one.num_envs = 1;
    return one;
  }(), 0)->spec();
  remove_stale_segments(c.run.name);
  const std::string id = fmt::format("{}-{}", c.run.name, getpid());
  const std::string ring_name = "/pronghorn-" + id + "-ring";
  const std::string slab_name = "/pronghorn-" + id + "-slab";
  auto ring = buffer::Ring::create(ring_name, buffer::unroll_spec_for(spec, T, K),
                                   static_cast<uint32_t>(c.learner.ring_slots));
  Trainer trainer(c, spec);
  auto slab = buffer::WeightSlab::create(slab_name, trainer.model()->parameter_count());
  std::vector<float> flat(trainer.model()->parameter_count());
  TrainResult result;
  uint64_t episodes = 0;
  const std::string checkpoints = o.run_dir + "/checkpoints";
  if (o.resume) {
    std::string path;
    std::optional<Checkpoint> ckpt = load_newest_checkpoint(checkpoints, &path);
    PRONGHORN_CHECK(ckpt.has_value(), "resume: no valid checkpoint in ", checkpoints);
    PRONGHORN_CHECK(ckpt->parameters.size() == flat.size(), "resume: checkpoint ", path, " holds ",
                    ckpt->parameters.size(), " parameters, the model has ", flat.size());
    trainer.model()->read_flat(ckpt->parameters.data());
    trainer.load_optimizer_state(ckpt->optimizer);
    if (!ckpt->rng.empty()) {
      at::Tensor state = at::empty({static_cast<int64_t>(ckpt->rng.size())}, at::kByte);
      std::memcpy(state.data_ptr<uint8_t>(), ckpt->rng.data(), ckpt->rng.size());
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      generator.set_state(state);
    }
    result.env_steps = ckpt->env_steps;
    result.learner_steps = ckpt->learner_steps;
    episodes = ckpt->episodes;
    slab->set_version(ckpt->policy_version);
    spdlog::info("resumed from {}: {} env steps, {} learner steps, policy version {}", path,
                 result.env_steps, result.learner_steps, ckpt->policy_version);
  }
  trainer.model()->write_flat(flat.data());
  uint64_t version = slab->publish(flat.data());
  auto checkpoint = [&] {
    Checkpoint ck;
    ck.env_steps = result.env_steps;
    ck.learner_steps = result.learner_steps;
    ck.episodes = episodes;
    ck.policy_version = version;
    ck.parameters = flat;
    ck.optimizer = trainer.optimizer_state();
    at::Tensor state = at::detail::getDefaultCPUGenerator().get_state();
    ck.rng.assign(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()), state.numel());
    return save_checkpoint(checkpoints, ck, static_cast<int>(c.run.keep_checkpoints));
  };

  const int actors = actor_count(c);
  Supervisor supervisor({"actor", "--ring", ring_name, "--slab", slab_name, "--config",
                         o.run_dir + "/config.toml", "--learner-pid", std::to_string(getpid())},
                        actors);
  spdlog::info("training {} on {}: {} actors × {} envs, unrolls of {}, batches of {}", c.run.name,
               spec.name, actors, K, T, B);

  std::ofstream metrics(o.run_dir + "/metrics.jsonl", std::ios::app);
  std::deque<float> recent;  // returns of the last 100 episodes
  std::vector<CurvePoint> curve;
  uint64_t lag_sum = 0, lag_max = 0, unrolls = 0;
  const auto start = Clock::now();
  auto last_report = start, last_checkpoint = start;
  uint64_t steps_at_report = result.env_steps;
  StepStats last;
  auto mean_return = [&] {
    return recent.empty() ? 0.0 : std::accumulate(recent.begin(), recent.end(), 0.0) / recent.size();
  };
  while (!stop.load()) {
    supervisor.poll();
    auto taken = ring->take(static_cast<uint32_t>(B), version,
                            static_cast<uint64_t>(c.learner.max_policy_lag), 200ms);
    if (!taken) continue;
    Batch batch = make_batch(*taken, ring->layout(), spec, T, K, c.loss.discount, version);
    const double progress = static_cast<double>(result.env_steps) / c.run.total_steps;
    last = trainer.learn(batch, progress);
    ring->release(*taken);
    trainer.model()->write_flat(flat.data());
    version = slab->publish(flat.data());
    result.env_steps += static_cast<uint64_t>(T * K * B);
    ++result.learner_steps;
    unrolls += taken->size();
    lag_sum += batch.lag_sum;
    lag_max = std::max(lag_max, batch.lag_max);
    for (float r : batch.episode_returns) {
      recent.push_back(r);
      if (recent.size() > 100) recent.pop_front();
    }
    episodes += batch.episode_returns.size();
    const auto now = Clock::now();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const bool target = c.run.target_return != 0 && recent.size() >= 100 &&
                        mean_return() >= c.run.target_return;
    const bool done = target || result.env_steps >= static_cast<uint64_t>(c.run.total_steps);
    if (done || std::chrono::duration<double>(now - last_report).count() >= c.run.report_interval_s) {
      const double sps = (result.env_steps - steps_at_report) /
                         std::max(1e-9, std::chrono::duration<double>(now - last_report).count());
      buffer::RingCounters rc = ring->counters();
      float lo = recent.empty() ? 0 : *std::min_element(recent.begin(), recent.end());
      float hi = recent.empty() ? 0 : *std::max_element(recent.begin(), recent.end());
      metrics << fmt::format(
          "{{\"time_s\": {:.3f}, \"env_steps\": {}, \"learner_steps\": {}, "
          "\"policy_version\": {}, \"sps\": {:.0f}, "
          "\"episodes\": {}, \"episode_return_mean\": {:.3f}, \"episode_return_min\": {:.3f}, "
          "\"episode_return_max\": {:.3f}, \"loss_total\": {:.6f}, \"loss_policy\": {:.6f}, "
          "\"loss_value\": {:.6f}, \"entropy\": {:.6f}, \"grad_norm\": {:.6f}, "
          "\"policy_lag_mean\": {:.3f}, \"policy_lag_max\": {}, \"ring_occupancy\": {}, "
          "\"unrolls_committed\": {}, \"unrolls_consumed\": {}, \"unrolls_dropped_stale\": {}, "
          "\"slots_reclaimed\": {}, \"actors_alive\": {}, \"actor_restarts\": {}}}\n",
          elapsed, result.env_steps, result.learner_steps, version, sps, episodes, mean_return(), lo, hi,
          last.total, last.policy, last.value, last.entropy, last.grad_norm,
          unrolls ? static_cast<double>(lag_sum) / unrolls : 0.0, lag_max, rc.ready,
          rc.committed, rc.consumed, rc.dropped_stale, rc.reclaimed, supervisor.alive(),
          supervisor.restarts());
      metrics.flush();
      if (!recent.empty()) {
        curve.push_back({static_cast<double>(result.env_steps), elapsed, mean_return()});
        write_curves_svg(o.run_dir + "/curves.svg", c.run.name + " on " + spec.name, curve);
      }
      std::fprintf(stderr, "\r%8.1fs  %10llu steps  %7.0f SPS  %6llu episodes  return %7.1f   ",
                   elapsed, static_cast<unsigned long long>(result.env_steps), sps,
                   static_cast<unsigned long long>(episodes), mean_return());
      last_report = now;
      steps_at_report = result.env_steps;
    }
    if (c.run.checkpoint_interval_s > 0 &&
        std::chrono::duration<double>(now - last_checkpoint).count() >= c.run.checkpoint_interval_s) {
      checkpoint();
      last_checkpoint = now;
    }
    if (done) {
      result.reached_target = target;
      break;
    }
  }
  if (result.learner_steps > 0) spdlog::info("checkpoint {}", checkpoint());
  std::fprintf(stderr, "\n");
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.return_mean = mean_return();
  supervisor.stop();
  return result;
}

}  // namespace pronghorn::learner
