#include "learner/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "model/fast_adam.h"
#include "model/fast_mlp_train.h"

namespace pronghorn::learner {

namespace {

at::Device learner_device(LearnerConfig::Device setting) {
  const bool cuda = torch::cuda::is_available();
  if (setting == LearnerConfig::Device::kCuda) {
    PRONGHORN_CHECK(cuda,
                    "learner.device = \"cuda\": no CUDA device usable by LibTorch here "
                    "(a CPU build of LibTorch, or no GPU visible); use \"auto\" or \"cpu\"");
  }
  return setting == LearnerConfig::Device::kCpu || !cuda ? at::Device(at::kCPU)
                                                         : at::Device(at::kCUDA);
}

}  // namespace

Trainer::Trainer(const Config& c, const EnvSpec& spec)
    : c_(c),
      device_(learner_device(c.learner.device)),
      model_(model_spec_for(spec, c.model)),
      continuous_(spec.action_kind == ActionKind::kContinuous),
      use_gae_(c.loss.kind == LossConfig::Kind::kPpo &&
               c.loss.advantages == LossConfig::Advantages::kGae) {
  model_->to(device_);  // before the optimizer takes its parameters
  vtrace_params_ = {static_cast<float>(c.loss.rho_bar), static_cast<float>(c.loss.c_bar),
                    static_cast<float>(c.loss.rho_pg_bar), static_cast<float>(c.loss.gae_lambda)};
  loss_options_.kind =
      c.loss.kind == LossConfig::Kind::kPpo ? kernels::LossKind::kPpo : kernels::LossKind::kImpala;
  loss_options_.baseline_cost = static_cast<float>(c.loss.baseline_cost);
  loss_options_.entropy_cost = static_cast<float>(c.loss.entropy_cost);
  loss_options_.ppo_clip = static_cast<float>(c.loss.ppo_clip);
  loss_options_.mean_reduction = c.loss.reduction == LossConfig::Reduction::kMean;
  const double lr = c.learner.learning_rate;
  if (c.learner.optimizer == LearnerConfig::Optimizer::kRmsprop) {
    optimizer_ = std::make_unique<torch::optim::RMSprop>(
        model_->parameters(),
        torch::optim::RMSpropOptions(lr).alpha(c.learner.rmsprop_alpha).eps(c.learner.adam_eps));
  } else {
    optimizer_ = std::make_unique<torch::optim::Adam>(
        model_->parameters(), torch::optim::AdamOptions(lr).eps(c.learner.adam_eps));
  }
}

std::string Trainer::optimizer_state() {
  torch::serialize::OutputArchive archive;
  optimizer_->save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void Trainer::load_optimizer_state(const std::string& state) {
  torch::serialize::InputArchive archive;
  std::istringstream in(state);
  archive.load_from(in);
  optimizer_->load(archive);
}

// On CUDA: each field through pinned memory, copied without blocking the host
// (the stream orders it before the forward pass that reads it).
Batch Trainer::on_device(const Batch& cpu) const {
  if (device_.is_cpu()) return cpu;
  auto move = [&](const at::Tensor& t) {
    return t.pin_memory().to(device_, /*non_blocking=*/true);
  };
  Batch b = cpu;
  b.obs = move(cpu.obs);
  b.actions = move(cpu.actions);
  b.rewards = move(cpu.rewards);
  b.discounts = move(cpu.discounts);
  b.truncated = move(cpu.truncated);
  b.final_values = move(cpu.final_values);
  b.behaviour_log_probs = move(cpu.behaviour_log_probs);
  if (cpu.core_state.defined()) {
    b.ended = move(cpu.ended);
    b.core_state = move(cpu.core_state);
  }
  return b;
}

StepStats Trainer::backward(const Batch& batch) {
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  const auto forward_start = Clock::now();
  const Batch b = on_device(batch);
  const int64_t T = b.rewards.size(0), N = b.rewards.size(1);
  // [(T+1)·N] outputs. A recurrent core runs through the T+1 steps from the
  // actors' stored state, zeroed after each step that ended an episode, so
  // the bootstrap row T has the state its step had on the actor.
  CoreState core;
  if (model_->recurrent()) {
    PRONGHORN_CHECK(b.core_state.defined(),
                    "learner step: a recurrent model needs the batch's core_state");
    core = {b.core_state[0], b.core_state[1]};
  }
  // A feed-forward model takes the fused MLP path (model/fast_mlp_train.h)
  // where it applies.
  PolicyOutput out = model_->recurrent()
                         ? model_->forward_sequence(b.obs, core, b.ended)
                         : policy_forward(*model_, b.obs.flatten(0, 1), c_.model.fast_path);
  at::Tensor logits = out.logits.view({T + 1, N, -1});
  at::Tensor values = out.value.view({T + 1, N});
  at::Tensor head = logits.slice(0, 0, T);
  at::Tensor v = values.slice(0, 0, T);
  const kernels::Truncation truncation{b.truncated, b.final_values};
  const kernels::VtraceParams& vp = vtrace_params_;
  // Gaussian heads: the log-std of steps 0 … T−1, [T, N, D].
  at::Tensor log_std = continuous_ ? out.log_std.view({T + 1, N, -1}).slice(0, 0, T) : at::Tensor();
  at::Tensor advantages, targets;
  {
    at::NoGradGuard no_grad;
    at::Tensor bootstrap = values[T].detach();
    if (continuous_) {
      at::Tensor log_rhos =
          (gaussian_log_prob(b.actions, head, log_std) - b.behaviour_log_probs).detach();
      auto r = kernels::vtrace_from_log_rhos(log_rhos, b.discounts, b.rewards, v.detach(),
                                             bootstrap, vp, truncation);
      advantages = r.pg_advantages, targets = r.vs;
    } else if (use_gae_) {
      auto r =
          kernels::gae_from_logits(head.detach(), b.actions, b.behaviour_log_probs, b.discounts,
                                   b.rewards, v.detach(), bootstrap, vp, truncation);
      advantages = r.advantages, targets = r.returns;
    } else {
      auto r =
          kernels::vtrace_from_logits(head.detach(), b.actions, b.behaviour_log_probs, b.discounts,
                                      b.rewards, v.detach(), bootstrap, vp, truncation);
      advantages = r.pg_advantages, targets = r.vs;
    }
  }
  kernels::LossResult loss =
      continuous_ ? kernels::gaussian_loss(head, log_std, v, b.actions, b.behaviour_log_probs,
                                           advantages, targets, loss_options_)
                  : kernels::categorical_loss(head, v, b.actions, b.behaviour_log_probs, advantages,
                                              targets, loss_options_);
  StepStats s;
  s.forward_s = seconds_since(forward_start);
  const auto backward_start = Clock::now();
  optimizer_->zero_grad();
  loss.total.backward();
  s.backward_s = seconds_since(backward_start);
  s.total = loss.total.item<double>();
  s.policy = loss.policy.item<double>();
  s.value = loss.value.item<double>();
  s.entropy = loss.entropy.item<double>();
  return s;
}

void Trainer::apply(StepStats& s, double progress) {
  using Clock = std::chrono::steady_clock;
  const auto optimizer_start = Clock::now();
  // The norm is wanted even unclipped: it is the finite check's input.
  const double max_norm = c_.learner.max_grad_norm > 0 ? c_.learner.max_grad_norm
                                                       : std::numeric_limits<double>::infinity();
  s.grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), max_norm);
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
  for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
  s.learning_rate = lr;
  // Adam in one pass per tensor on the fused path (model/fast_adam.h), on
  // LibTorch's optimizer state either way.
  auto* adam = dynamic_cast<torch::optim::Adam*>(optimizer_.get());
  if (adam != nullptr && c_.model.fast_path == ModelConfig::FastPath::kAuto) {
    fused_adam_step(*adam);
  } else {
    optimizer_->step();
  }
  s.optimizer_s = std::chrono::duration<double>(Clock::now() - optimizer_start).count();
}

}  // namespace pronghorn::learner
