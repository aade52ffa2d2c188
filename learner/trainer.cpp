#include "learner/trainer.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "core/clock.h"
#include "core/error.h"
#include "learner/optimizer_archive.h"
#include "model/tensor_runtime.h"

namespace pronghorn::learner {

namespace {

using Clock = std::chrono::steady_clock;

// The columns `columns` of every field of `b`: an env's T+1 rows, its ended
// flags and its core's state stay together.
Batch columns_of(const Batch& b, const at::Tensor& columns) {
  return map_tensors(b, [&](const at::Tensor& t) { return t.index_select(1, columns); });
}

at::Device learner_device(LearnerConfig::Device setting) {
  return resolve_learner_device(setting) == LearnerConfig::Device::kCuda ? at::Device(at::kCUDA)
                                                                         : at::Device(at::kCPU);
}

}  // namespace

Trainer::Trainer(const Config& c, const EnvSpec& spec)
    : c_(c),
      device_(learner_device(c.learner.device)),
      policy_(PolicyNet(model_spec_for(spec, c.model)), device_, c.model, c.learner),
      continuous_(spec.action_kind == ActionKind::kContinuous),
      use_gae_(c.loss.kind == LossConfig::Kind::kPpo &&
               c.loss.advantages == LossConfig::Advantages::kGae),
      epochs_(c.learner.epochs),
      minibatches_(c.learner.minibatches),
      shuffle_steps_(c.learner.shuffle == LearnerConfig::Shuffle::kSteps),
      permutations_(at::detail::createCPUGenerator(static_cast<uint64_t>(c.run.seed))),
      batch_advantage_stats_(c.loss.normalize_advantages &&
                             c.loss.advantage_stats == LossConfig::AdvantageStats::kBatch) {
  // The config's checks refuse this too; a single step has no trajectory for
  // V-trace or a core.
  PRONGHORN_CHECK(!shuffle_steps_ || (use_gae_ && c.model.core == ModelConfig::Core::kNone),
                  "learner.shuffle = \"steps\": expected PPO on GAE and a feed-forward model");
  if (c.loss.return_scaling) return_scaler_.emplace(c.loss.discount, c.env.num_envs);
  if (c.model.normalize_observations) {
    observation_stats_.emplace(policy_.model()->observation_size());
  }
  vtrace_params_ = {static_cast<float>(c.loss.rho_bar), static_cast<float>(c.loss.c_bar),
                    static_cast<float>(c.loss.rho_pg_bar), static_cast<float>(c.loss.gae_lambda)};
  loss_options_.kind =
      c.loss.kind == LossConfig::Kind::kPpo ? kernels::LossKind::kPpo : kernels::LossKind::kImpala;
  loss_options_.baseline_cost = static_cast<float>(c.loss.baseline_cost);
  loss_options_.entropy_cost = static_cast<float>(c.loss.entropy_cost);
  loss_options_.ppo_clip = static_cast<float>(c.loss.ppo_clip);
  loss_options_.value_clip = static_cast<float>(c.loss.value_clip);
  loss_options_.mean_reduction = c.loss.reduction == LossConfig::Reduction::kMean;
}

void StepStats::add(const StepStats& step) {
  ++optimizer_steps;
  const double n = static_cast<double>(optimizer_steps);
  const auto mean = [&](double& into, double x) { into += (x - into) / n; };
  mean(total, step.total);
  mean(policy, step.policy);
  mean(value, step.value);
  mean(entropy, step.entropy);
  mean(clip_fraction, step.clip_fraction);
  mean(approx_kl, step.approx_kl);
  mean(grad_norm, step.grad_norm);
  mean(learning_rate, step.learning_rate);
  forward_s += step.forward_s;
  backward_s += step.backward_s;
  optimizer_s += step.optimizer_s;
  allreduce_s += step.allreduce_s;
}

StepStats Trainer::learn(const Batch& batch, double progress) {
  start_batch(batch);
  StepStats stats;
  for (int64_t step = 0; step < steps_per_batch(); ++step) {
    StepStats s = backward_step(step);
    apply(s, progress);
    stats.add(s);
  }
  return stats;
}

std::string Trainer::optimizer_state() { return save_optimizer(policy_.optimizer()); }

void Trainer::load_optimizer_state(const std::string& state) {
  load_optimizer(state, policy_.optimizer(), device_);
}

// On CUDA: each field through pinned memory, copied without blocking the host
// (the stream orders it before the forward pass that reads it).
Batch Trainer::on_device(const Batch& cpu) const {
  if (device_.is_cpu()) return cpu;
  return map_tensors(
      cpu, [&](const at::Tensor& t) { return t.pin_memory().to(device_, /*non_blocking=*/true); });
}

void Trainer::restore_observation_stats(const ObservationStats& stats) {
  PRONGHORN_CHECK(observation_stats_ && stats.size() == observation_stats_->size(),
                  "observation statistics of ", stats.size(), " values for a model of ",
                  policy_.model()->observation_size(), " that ",
                  observation_stats_ ? "normalises" : "does not normalise");
  observation_stats_ = stats;
  policy_.model()->set_observation_statistics(stats);
}

// The observations rows 1..T of every column are the unroll's own (row 0
// repeats the last row of the actor's previous unroll): each counted once.
ObservationMoments Trainer::observation_moments(const Batch& batch) const {
  PRONGHORN_CHECK(observation_stats_, "observation moments of a model that does not normalise");
  const at::Tensor rows = batch.obs.slice(0, 1).contiguous();
  const int64_t d = observation_stats_->size();
  return ObservationMoments::of(rows.data_ptr<float>(), rows.numel() / d, d);
}

void Trainer::merge_observation_moments(const std::vector<ObservationMoments>& ranks) {
  PRONGHORN_CHECK(observation_stats_, "observation moments for a model that does not normalise");
  for (const ObservationMoments& set : ranks) observation_stats_->merge(set);
  policy_.model()->set_observation_statistics(*observation_stats_);
}

void Trainer::start_batch(const Batch& batch, ObservationUpdate update) {
  const auto start = Clock::now();
  // Before the forward passes: the weights this batch trains are published
  // with the statistics they were trained under.
  if (observation_stats_ && update == ObservationUpdate::kFromBatch) {
    merge_observation_moments({observation_moments(batch)});
  }
  if (return_scaler_) {  // on a copy of the rewards: the caller's batch stays as taken
    Batch scaled = batch;
    scaled.rewards = batch.rewards.clone();
    return_scaler_->scale(scaled.rewards, batch.discounts.eq(0).bitwise_or(batch.truncated.ne(0)),
                          batch.actors);
    batch_ = on_device(scaled);
  } else {
    batch_ = on_device(batch);
  }
  const int64_t N = batch_.rewards.size(1);
  // What the permutation shuffles: N columns, or the T·N steps (t·N + n).
  const int64_t items = shuffle_steps_ ? batch_.rewards.numel() : N;
  PRONGHORN_CHECK(items % minibatches_ == 0, "learner step: learner.minibatches = ", minibatches_,
                  " does not divide the batch's ", items, shuffle_steps_ ? " steps" : " columns");
  minibatches_of_.clear();
  for (int64_t e = 0; e < epochs_; ++e) {
    const at::Tensor order = minibatches_ == 1 ? at::arange(items, at::kLong)
                                               : at::randperm(items, permutations_, at::kLong);
    const at::Tensor on = order.to(device_);
    const int64_t size = items / minibatches_;
    for (int64_t m = 0; m < minibatches_; ++m) {
      minibatches_of_.push_back(on.slice(0, m * size, (m + 1) * size));
    }
  }
  batch_advantages_ = batch_targets_ = batch_values_ = at::Tensor();
  advantage_mean_ = advantage_std_ = at::Tensor();
  // Standard PPO: GAE from the weights the batch starts with, kept for every
  // pass; loss.value_clip's V₀, the values of those weights;
  // loss.advantage_stats = "batch"'s mean and std, of the advantages under
  // them. With one step all come from that step's own forward, the same
  // weights (and the value clip cannot bite).
  const bool clip_values = loss_options_.value_clip > 0;
  if ((use_gae_ || clip_values || batch_advantage_stats_) && steps_per_batch() > 1) {
    at::NoGradGuard no_grad;
    const int64_t T = batch_.rewards.size(0);
    const PolicyOutput out = forward(batch_);
    const at::Tensor values = out.value.view({T + 1, N});
    if (use_gae_ || batch_advantage_stats_) {
      auto [batch_advantages, batch_targets] = advantages_of(batch_, out, values);
      if (batch_advantage_stats_) {
        advantage_mean_ = batch_advantages.mean();
        advantage_std_ = batch_advantages.std(/*unbiased=*/false);
      }
      if (use_gae_) batch_advantages_ = batch_advantages, batch_targets_ = batch_targets;
    }
    if (clip_values) batch_values_ = values.slice(0, 0, T);
  }
  start_s_ = seconds_since(start);
}

const at::Tensor& Trainer::minibatch(int64_t step) const {
  PRONGHORN_ASSERT(step >= 0 && step < static_cast<int64_t>(minibatches_of_.size()),
                   "a step of the started batch");
  return minibatches_of_[static_cast<size_t>(step)];
}

StepStats Trainer::backward_step(int64_t step) {
  const auto start = Clock::now();
  const at::Tensor& picked = minibatch(step);  // columns, or single steps
  StepStats s;
  if (minibatches_ == 1) {
    s = backward_on(batch_, batch_advantages_, batch_targets_, batch_values_);
  } else if (shuffle_steps_) {
    s = backward_on_steps(picked);
  } else {
    const auto pick = [&](const at::Tensor& t) {
      return t.defined() ? t.index_select(1, picked) : t;
    };
    s = backward_on(columns_of(batch_, picked), pick(batch_advantages_), pick(batch_targets_),
                    pick(batch_values_));
  }
  s.forward_s = seconds_since(start) - s.backward_s;
  if (step == 0) s.forward_s += start_s_;
  return s;
}

StepStats Trainer::backward(const Batch& batch) {
  const auto start = Clock::now();
  advantage_mean_ = advantage_std_ = at::Tensor();  // no plan: its own statistics are the batch's
  StepStats s = backward_on(on_device(batch), at::Tensor(), at::Tensor());
  s.forward_s = seconds_since(start) - s.backward_s;
  return s;
}

// The advantages and value targets of `b` ([T, N]) from the network's
// outputs on it ([(T+1)·N] rows; values [T+1, N]), no gradients: GAE(λ) and
// its returns (PPO on GAE), or V-trace's policy-gradient advantages and vs,
// each weighted by the clipped ratios of the policy in `out` to the actors'
// (1 where they are the same policy).
std::pair<at::Tensor, at::Tensor> Trainer::advantages_of(const Batch& b, const PolicyOutput& out,
                                                         const at::Tensor& values) {
  at::NoGradGuard no_grad;
  const int64_t T = b.rewards.size(0), N = b.rewards.size(1);
  const at::Tensor head = out.logits.view({T + 1, N, -1}).slice(0, 0, T).detach();
  const at::Tensor v = values.slice(0, 0, T).detach(), bootstrap = values[T].detach();
  const kernels::Truncation truncation{b.truncated, b.final_values};
  const kernels::VtraceParams& p = vtrace_params_;
  if (!continuous_) {
    if (use_gae_) {
      const kernels::GaeResult r =
          kernels::gae_from_logits(head, b.actions, b.behaviour_log_probs, b.discounts, b.rewards,
                                   v, bootstrap, p, truncation);
      return {r.advantages, r.returns};
    }
    const kernels::VtraceResult r =
        kernels::vtrace_from_logits(head, b.actions, b.behaviour_log_probs, b.discounts, b.rewards,
                                    v, bootstrap, p, truncation);
    return {r.pg_advantages, r.vs};
  }
  const at::Tensor log_std = out.log_std.view({T + 1, N, -1}).slice(0, 0, T).detach();
  const at::Tensor log_rhos = gaussian_log_prob(b.actions, head, log_std) - b.behaviour_log_probs;
  if (use_gae_) {
    const kernels::GaeResult r =
        kernels::gae_from_log_rhos(log_rhos, b.discounts, b.rewards, v, bootstrap, p, truncation);
    return {r.advantages, r.returns};
  }
  const kernels::VtraceResult r =
      kernels::vtrace_from_log_rhos(log_rhos, b.discounts, b.rewards, v, bootstrap, p, truncation);
  return {r.pg_advantages, r.vs};
}

// [(T+1)·N] outputs. A recurrent core runs through the T+1 steps from the
// actors' stored state, zeroed after each step that ended an episode, so the
// bootstrap row T has the state its step had on the actor.
PolicyOutput Trainer::forward(const Batch& b) {
  return policy_.forward(b.obs, b.core_state, b.ended);
}

StepStats Trainer::backward_on(const Batch& b, at::Tensor advantages, at::Tensor targets,
                               const at::Tensor& old_values) {
  const int64_t T = b.rewards.size(0), N = b.rewards.size(1);
  PolicyOutput out = forward(b);
  at::Tensor logits = out.logits.view({T + 1, N, -1});
  at::Tensor values = out.value.view({T + 1, N});
  at::Tensor head = logits.slice(0, 0, T);
  at::Tensor v = values.slice(0, 0, T);
  // Gaussian heads: the log-std of steps 0 … T−1, [T, N, D].
  at::Tensor log_std = continuous_ ? out.log_std.view({T + 1, N, -1}).slice(0, 0, T) : at::Tensor();
  // Unless given (GAE, once for the batch by start_batch()): from this forward.
  if (!advantages.defined()) std::tie(advantages, targets) = advantages_of(b, out, values);
  return loss_backward({head, log_std, v}, b.actions, b.behaviour_log_probs, advantages, targets,
                       old_values);
}

// learner.shuffle = "steps": the steps `steps` (t·N + n) of the started
// batch, each on its own: the forward takes their observations alone (a
// feed-forward model), the advantages and targets are the batch's GAE.
StepStats Trainer::backward_on_steps(const at::Tensor& steps) {
  const int64_t T = batch_.rewards.size(0), M = steps.size(0);
  // [T, N, ...] → the picked steps as one row of M columns, [1, M, ...].
  const auto pick = [&](const at::Tensor& t) {
    return t.defined() ? t.slice(0, 0, T).flatten(0, 1).index_select(0, steps).unsqueeze(0) : t;
  };
  const PolicyOutput out = policy_.forward(pick(batch_.obs), at::Tensor(), at::Tensor());
  const at::Tensor log_std = continuous_ ? out.log_std.view({1, M, -1}) : at::Tensor();
  return loss_backward({out.logits.view({1, M, -1}), log_std, out.value.view({1, M})},
                       pick(batch_.actions), pick(batch_.behaviour_log_probs),
                       pick(batch_advantages_), pick(batch_targets_), pick(batch_values_));
}

StepStats Trainer::loss_backward(const HeadOutputs& o, const at::Tensor& actions,
                                 const at::Tensor& behaviour_log_probs, at::Tensor advantages,
                                 const at::Tensor& targets, const at::Tensor& old_values) {
  if (c_.loss.normalize_advantages) {
    at::NoGradGuard no_grad;
    // The population std: a one-sample minibatch gets advantage 0, not NaN.
    // The batch's statistics where start_batch() took them (with one step
    // per batch, this minibatch is the batch).
    if (advantage_mean_.defined()) {
      advantages = (advantages - advantage_mean_) / (advantage_std_ + 1e-8);
    } else {
      advantages = (advantages - advantages.mean()) / (advantages.std(/*unbiased=*/false) + 1e-8);
    }
  }
  kernels::LossResult loss =
      continuous_
          ? kernels::gaussian_loss(o.head, o.log_std, o.values, actions, behaviour_log_probs,
                                   advantages, targets, loss_options_, old_values)
          : kernels::categorical_loss(o.head, o.values, actions, behaviour_log_probs, advantages,
                                      targets, loss_options_, old_values);
  StepStats s;
  const auto backward_start = Clock::now();
  policy_.zero_grad();
  loss.total.backward();
  s.backward_s = seconds_since(backward_start);
  s.total = loss.total.item<double>();
  s.policy = loss.policy.item<double>();
  s.value = loss.value.item<double>();
  s.entropy = loss.entropy.item<double>();
  s.clip_fraction = loss.clip_fraction.item<double>();
  s.approx_kl = loss.approx_kl.item<double>();
  return s;
}

void Trainer::apply(StepStats& s, double progress) {
  const auto optimizer_start = Clock::now();
  // The norm is wanted even unclipped: it is the finite check's input.
  const double max_norm = c_.learner.max_grad_norm > 0 ? c_.learner.max_grad_norm
                                                       : std::numeric_limits<double>::infinity();
  s.grad_norm = policy_.clip_gradients(max_norm);
  // A NaN or inf would reach every weight in this step and every actor after
  // it: the job ends here, its weights and checkpoints as they were.
  PRONGHORN_CHECK(std::isfinite(s.total) && std::isfinite(s.grad_norm),
                  "learner step: the loss is not finite (total ", s.total, ", policy ", s.policy,
                  ", value ", s.value, ", entropy ", s.entropy, ", gradient norm ", s.grad_norm,
                  "); the weights were not updated. A learning rate or loss.reward_scale too "
                  "large makes this");
  const double lr =
      c_.learner.learning_rate * (c_.learner.lr_schedule == LearnerConfig::LrSchedule::kLinear
                                      ? std::max(0.0, 1.0 - progress)
                                      : 1.0);
  s.learning_rate = lr;
  policy_.step(lr);
  s.optimizer_s = seconds_since(optimizer_start);
}

}  // namespace pronghorn::learner
