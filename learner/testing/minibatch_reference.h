// The float64 reference of several optimizer steps a batch (PPO on GAE,
// minibatches of columns or of single steps), stepped by hand, for
// trainer_minibatch_test.cpp and trainer_steps_test.cpp.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "learner/testing/data_parallel_ranks.h"
#include "learner/trainer.h"

namespace pronghorn::learner::testing {

inline Config ppo_config(const std::vector<std::string>& more) {
  std::vector<std::string> overrides = {"learner.device=cpu", "loss.kind=ppo",
                                        "loss.advantages=gae", "loss.gae_lambda=0.9"};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return load_config("", overrides);
}

// The same initial weights as a Trainer made after torch::manual_seed(seed),
// in float64, stepped by hand.
struct Reference {
  Config c;
  PolicyNet net;
  std::vector<at::Tensor> m, v;  // Adam's moments
  int64_t steps = 0;

  Reference(const Config& config, uint64_t seed)
      : c(config), net((torch::manual_seed(seed), model_spec_for(cartpole(), config.model))) {
    net->to(at::kDouble);
    for (const at::Tensor& p : net->parameters()) {
      m.push_back(torch::zeros_like(p));
      v.push_back(torch::zeros_like(p));
    }
  }

  // Logits [T+1, N, A] and values [T+1, N] of `obs` [T+1, N, 4].
  std::pair<at::Tensor, at::Tensor> forward(const at::Tensor& obs) {
    const int64_t rows = obs.size(0), N = obs.size(1);
    PolicyOutput out = net->forward(obs.to(at::kDouble).flatten(0, 1));
    return {out.logits.view({rows, N, -1}), out.value.view({rows, N})};
  }

  static at::Tensor log_pi(const at::Tensor& logits, const at::Tensor& actions) {
    return torch::log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1);
  }

  // GAE(λ) weighted by min(1, π/μ) as the kernel's (no time limits):
  // advantages and returns, [T, N].
  std::pair<at::Tensor, at::Tensor> gae(const Batch& b) {
    torch::NoGradGuard no_grad;
    const auto [logits, values] = forward(b.obs);
    const int64_t T = b.rewards.size(0);
    const at::Tensor rho = torch::clamp_max(torch::exp(log_pi(logits.slice(0, 0, T), b.actions) -
                                                       b.behaviour_log_probs.to(at::kDouble)),
                                            1.0);
    const at::Tensor r = b.rewards.to(at::kDouble), d = b.discounts.to(at::kDouble);
    at::Tensor advantages = torch::zeros_like(r);
    at::Tensor next = torch::zeros_like(r[0]);
    for (int64_t t = T - 1; t >= 0; --t) {
      const at::Tensor delta = r[t] + d[t] * values[t + 1] - values[t];
      next = rho[t] * delta + d[t] * c.loss.gae_lambda * rho[t] * next;
      advantages[t] = next;
    }
    return {advantages, values.slice(0, 0, T) + advantages};
  }

  // PPO's total loss on the columns `cols` of `b`, from given advantages.
  at::Tensor loss(const Batch& b, const at::Tensor& cols, const at::Tensor& advantages,
                  const at::Tensor& returns) {
    return loss_of(
        b, [&](const at::Tensor& t) { return t.index_select(1, cols); }, advantages, returns);
  }

  // The same on the single steps `picked` (t·N + n) of `b`.
  at::Tensor loss_on_steps(const Batch& b, const at::Tensor& picked, const at::Tensor& advantages,
                           const at::Tensor& returns) {
    return loss_of(
        b, [&](const at::Tensor& t) { return t.flatten(0, 1).index_select(0, picked); }, advantages,
        returns);
  }

  // PPO's total loss on the samples `take` picks out of [T, N, ...] tensors.
  template <typename Take>
  at::Tensor loss_of(const Batch& b, Take take, const at::Tensor& all_advantages,
                     const at::Tensor& returns) {
    const int64_t T = b.rewards.size(0);
    const auto [logits, values] = forward(b.obs);
    const at::Tensor head = take(logits.slice(0, 0, T));
    const at::Tensor ratio =
        torch::exp(log_pi(head, take(b.actions)) - take(b.behaviour_log_probs).to(at::kDouble));
    at::Tensor advantages = take(all_advantages);
    if (c.loss.normalize_advantages) {
      advantages = (advantages - advantages.mean()) / (advantages.std(false) + 1e-8);
    }
    const double eps = c.loss.ppo_clip;
    const at::Tensor policy =
        -torch::min(ratio * advantages, torch::clamp(ratio, 1 - eps, 1 + eps) * advantages).mean();
    const at::Tensor value = 0.5 * (take(returns) - take(values.slice(0, 0, T))).pow(2).mean();
    const at::Tensor entropy =
        -(torch::softmax(head, -1) * torch::log_softmax(head, -1)).sum(-1).mean();
    return policy + c.loss.baseline_cost * value - c.loss.entropy_cost * entropy;
  }

  // Gradient-norm clipping and one Adam step, as LibTorch's, by hand.
  void step() {
    torch::NoGradGuard no_grad;
    std::vector<at::Tensor> params = net->parameters();
    double norm = 0;
    for (const at::Tensor& p : params) norm += p.grad().pow(2).sum().item<double>();
    norm = std::sqrt(norm);
    const double max = c.learner.max_grad_norm;  // 0: no clipping
    const double clip = max > 0 ? max / (norm + 1e-6) : 1.0;
    ++steps;
    const double lr = c.learner.learning_rate, b1 = 0.9, b2 = 0.999;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor g = params[i].grad() * std::min(1.0, clip);
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const at::Tensor m_hat = m[i] / (1 - std::pow(b1, steps));
      const at::Tensor v_hat = v[i] / (1 - std::pow(b2, steps));
      params[i] -= lr * m_hat / (v_hat.sqrt() + c.learner.adam_eps);
      params[i].mutable_grad().zero_();
    }
  }

  std::vector<double> weights() {
    std::vector<double> flat;
    for (const at::Tensor& p : net->parameters()) {
      const at::Tensor d = p.detach().contiguous();
      flat.insert(flat.end(), d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    }
    return flat;
  }
};

// Largest |a − b| over the flat weights.
inline double worst_difference(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// The trainer's weights against the reference's after the same steps: the
// reference must have moved (else the comparison says little) and the
// trainer must be within 2e-6 of it.
inline void expect_same_steps(Trainer& t, const std::vector<double>& start,
                              const std::vector<double>& want) {
  double moved = 0;
  for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - start[i]));
  EXPECT_GT(moved, 1e-3) << "the reference hardly moved: the comparison would say little";
  EXPECT_LT(worst_difference(weights(t), want), 2e-6) << "the weights moved by up to " << moved;
}

}  // namespace pronghorn::learner::testing
