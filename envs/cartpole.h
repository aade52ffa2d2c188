// CartPole with Gymnasium CartPole-v1 dynamics, exactly: gravity 9.8, cart
// mass 1.0, pole mass 0.1, half-length 0.5, force 10, tau 0.02, explicit
// Euler in Gymnasium's order, terminated when |x| > 2.4 or |θ| > 12°,
// truncated at 500 steps, reward 1 on every step (the terminating one too),
// initial state uniform in [−0.05, 0.05]⁴. Like Gymnasium, the state is kept
// in double precision and observed as float32[4] = (x, ẋ, θ, θ̇).
// Actions: 0 pushes left, 1 pushes right.
//
// The state is stored as columns (structure of arrays) so the physics of K
// envs runs as one loop the compiler vectorises; resets are a second, sparse
// pass. sin and cos are polynomials that are exact to double precision for
// the angles a live pole can have (below), because libm's cannot vectorise.
// Test: envs/cartpole_test.cpp. Bench: `pronghorn bench env`.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "envs/env.h"
#include "envs/rng.h"

namespace pronghorn::envs {

class CartPole final : public BatchEnv {
 public:
  static constexpr double kGravity = 9.8;
  static constexpr double kMassCart = 1.0;
  static constexpr double kMassPole = 0.1;
  static constexpr double kTotalMass = kMassCart + kMassPole;
  static constexpr double kLength = 0.5;  // half the pole's length
  static constexpr double kPoleMassLength = kMassPole * kLength;
  static constexpr double kForce = 10.0;
  static constexpr double kTau = 0.02;
  static constexpr double kThetaLimit = 12 * 2 * M_PI / 360;
  static constexpr double kXLimit = 2.4;
  static constexpr int64_t kMaxEpisodeSteps = 500;

  static EnvSpec make_spec(int64_t max_episode_steps) {
    EnvSpec spec;
    spec.name = "cartpole";
    spec.obs_dtype = Dtype::kFloat32;
    spec.obs_shape = {4};
    spec.action_kind = ActionKind::kDiscrete;
    spec.action_size = 2;
    spec.max_episode_steps = max_episode_steps > 0 ? max_episode_steps : kMaxEpisodeSteps;
    spec.target_return = 475;  // solved: Gym's CartPole-v1 threshold
    return spec;
  }

  // sin θ and cos θ for |θ| ≤ 0.25 by their Taylor series, to within one
  // double rounding: the first omitted terms, θ¹³/13! and θ¹⁴/14!, are below
  // 1e-19 there. A pole's θ never leaves that range at the start of a step:
  // a step that takes |θ| past 12° (0.2094) ends the episode and resets it.
  static void small_angle_sin_cos(double theta, double& sin_theta, double& cos_theta) {
    const double t2 = theta * theta;
    sin_theta =
        theta * (1 + t2 * (-1.0 / 6 +
                           t2 * (1.0 / 120 + t2 * (-1.0 / 5040 +
                                                   t2 * (1.0 / 362880 + t2 * (-1.0 / 39916800))))));
    cos_theta =
        1 + t2 * (-1.0 / 2 +
                  t2 * (1.0 / 24 +
                        t2 * (-1.0 / 720 + t2 * (1.0 / 40320 +
                                                 t2 * (-1.0 / 3628800 + t2 * (1.0 / 479001600))))));
  }

  CartPole(int64_t num_envs, uint64_t seed, int64_t max_episode_steps)
      : BatchEnv(make_spec(max_episode_steps), num_envs),
        limit_(spec().max_episode_steps),
        x_(num_envs),
        x_dot_(num_envs),
        theta_(num_envs),
        theta_dot_(num_envs),
        steps_(num_envs),
        done_(num_envs),
        rngs_(num_envs) {
    for (int64_t i = 0; i < num_envs; ++i) rngs_[i] = Rng(seed, static_cast<uint64_t>(i));
  }

 private:
  void reset_unchecked(void* obs) override {
    for (int64_t i = 0; i < num_envs(); ++i) start_episode(i, static_cast<float*>(obs));
  }

  void step_unchecked(const void* actions, const StepOutput& out) override {
    const int32_t* action = static_cast<const int32_t*>(actions);
    float* obs = static_cast<float*>(out.obs);
    const int64_t k = num_envs();
    double* __restrict x = x_.data();
    double* __restrict x_dot = x_dot_.data();
    double* __restrict theta = theta_.data();
    double* __restrict theta_dot = theta_dot_.data();
    int32_t* __restrict steps = steps_.data();
    uint8_t* __restrict done = done_.data();
    float* __restrict rewards = out.rewards;
    uint8_t* __restrict terminated_out = out.terminated;
    uint8_t* __restrict truncated_out = out.truncated;
    const int32_t limit = static_cast<int32_t>(limit_);
    // Pass 1, every env: Gymnasium's step, branch-free so it vectorises.
#pragma omp simd
    for (int64_t i = 0; i < k; ++i) {
      const double force = action[i] == 1 ? kForce : -kForce;
      double sin_theta, cos_theta;
      small_angle_sin_cos(theta[i], sin_theta, cos_theta);
      const double temp =
          (force + kPoleMassLength * theta_dot[i] * theta_dot[i] * sin_theta) / kTotalMass;
      const double theta_acc =
          (kGravity * sin_theta - cos_theta * temp) /
          (kLength * (4.0 / 3.0 - kMassPole * cos_theta * cos_theta / kTotalMass));
      const double x_acc = temp - kPoleMassLength * theta_acc * cos_theta / kTotalMass;
      x[i] += kTau * x_dot[i];
      x_dot[i] += kTau * x_acc;
      theta[i] += kTau * theta_dot[i];
      theta_dot[i] += kTau * theta_acc;
      steps[i] += 1;
      const uint8_t terminated = (x[i] < -kXLimit) | (x[i] > kXLimit) | (theta[i] < -kThetaLimit) |
                                 (theta[i] > kThetaLimit);
      const uint8_t truncated = steps[i] >= limit;
      terminated_out[i] = terminated;
      truncated_out[i] = truncated;
      rewards[i] = 1.0f;
      done[i] = terminated | truncated;
      obs[4 * i + 0] = static_cast<float>(x[i]);
      obs[4 * i + 1] = static_cast<float>(x_dot[i]);
      obs[4 * i + 2] = static_cast<float>(theta[i]);
      obs[4 * i + 3] = static_cast<float>(theta_dot[i]);
    }
    // Pass 2, the few envs whose episode ended: keep the last obs, start anew.
    for (int64_t i = 0; i < k; ++i) {
      if (!done[i]) continue;
      if (out.final_obs != nullptr) {
        std::memcpy(static_cast<float*>(out.final_obs) + 4 * i, obs + 4 * i, 4 * sizeof(float));
      }
      start_episode(i, obs);
    }
  }

  void start_episode(int64_t i, float* obs) {
    x_[i] = rngs_[i].uniform(-0.05, 0.05);
    x_dot_[i] = rngs_[i].uniform(-0.05, 0.05);
    theta_[i] = rngs_[i].uniform(-0.05, 0.05);
    theta_dot_[i] = rngs_[i].uniform(-0.05, 0.05);
    steps_[i] = 0;
    obs[4 * i + 0] = static_cast<float>(x_[i]);
    obs[4 * i + 1] = static_cast<float>(x_dot_[i]);
    obs[4 * i + 2] = static_cast<float>(theta_[i]);
    obs[4 * i + 3] = static_cast<float>(theta_dot_[i]);
  }

  const int64_t limit_;
  std::vector<double> x_, x_dot_, theta_, theta_dot_;  // [K] each
  std::vector<int32_t> steps_;                         // [K] steps into the episode
  std::vector<uint8_t> done_;                          // [K] scratch of pass 1
  std::vector<Rng> rngs_;                              // [K]
};

}  // namespace pronghorn::envs
