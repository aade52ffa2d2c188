// Pendulum with Gymnasium Pendulum-v1 dynamics: g 10, m 1, l 1, dt 0.05,
// torque clipped to [−2, 2], angular speed clipped to [−8, 8], reward
// −(θ̂² + 0.1 θ̇² + 0.001 u²) with θ̂ = θ wrapped to [−π, π), never terminal,
// truncated at 200 steps, initial θ ~ U[−π, π], θ̇ ~ U[−1, 1]. State in
// double, observed as float32[3] = (cos θ, sin θ, θ̇). Action: float32[1]
// torque in [−2, 2]. The continuous-action env. Test: envs/pendulum_test.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "envs/env.h"
#include "envs/rng.h"

namespace pronghorn::envs {

class Pendulum final : public BatchEnv {
 public:
  static constexpr double kGravity = 10.0;
  static constexpr double kMass = 1.0;
  static constexpr double kLength = 1.0;
  static constexpr double kDt = 0.05;
  static constexpr double kMaxSpeed = 8.0;
  static constexpr double kMaxTorque = 2.0;
  static constexpr int64_t kMaxEpisodeSteps = 200;

  static EnvSpec make_spec(int64_t max_episode_steps) {
    EnvSpec spec;
    spec.name = "pendulum";
    spec.obs_dtype = Dtype::kFloat32;
    spec.obs_shape = {3};
    spec.action_kind = ActionKind::kContinuous;
    spec.action_size = 1;
    spec.action_low = {static_cast<float>(-kMaxTorque)};
    spec.action_high = {static_cast<float>(kMaxTorque)};
    spec.max_episode_steps = max_episode_steps > 0 ? max_episode_steps : kMaxEpisodeSteps;
    spec.target_return = -250.0;  // solved: configs/pendulum.toml's
    return spec;
  }

  // θ wrapped to [−π, π), as Gymnasium's angle_normalize (floored modulo).
  static double normalize_angle(double theta) {
    const double two_pi = 2 * M_PI;
    return theta + M_PI - two_pi * std::floor((theta + M_PI) / two_pi) - M_PI;
  }

  Pendulum(int64_t num_envs, uint64_t seed, int64_t max_episode_steps)
      : BatchEnv(make_spec(max_episode_steps), num_envs),
        limit_(spec().max_episode_steps),
        theta_(num_envs),
        theta_dot_(num_envs),
        steps_(num_envs),
        rngs_(num_envs) {
    for (int64_t i = 0; i < num_envs; ++i) rngs_[i] = Rng(seed, static_cast<uint64_t>(i));
  }

 private:
  void reset_unchecked(void* obs) override {
    for (int64_t i = 0; i < num_envs(); ++i) start_episode(i, static_cast<float*>(obs));
  }

  void step_unchecked(const void* actions, const StepOutput& out) override {
    const float* torque = static_cast<const float*>(actions);
    float* obs = static_cast<float*>(out.obs);
    for (int64_t i = 0; i < num_envs(); ++i) {
      const double u = std::clamp(static_cast<double>(torque[i]), -kMaxTorque, kMaxTorque);
      const double th = theta_[i];
      const double th_dot = theta_dot_[i];
      const double th_hat = normalize_angle(th);
      const double cost = th_hat * th_hat + 0.1 * th_dot * th_dot + 0.001 * u * u;
      double new_th_dot = th_dot + (3 * kGravity / (2 * kLength) * std::sin(th) +
                                    3.0 / (kMass * kLength * kLength) * u) *
                                       kDt;
      new_th_dot = std::clamp(new_th_dot, -kMaxSpeed, kMaxSpeed);
      theta_[i] = th + new_th_dot * kDt;
      theta_dot_[i] = new_th_dot;
      out.rewards[i] = static_cast<float>(-cost);
      out.terminated[i] = 0;
      out.truncated[i] = ++steps_[i] >= limit_;
      observe(i, obs);
      if (out.truncated[i]) {
        if (out.final_obs != nullptr) {
          std::memcpy(static_cast<float*>(out.final_obs) + 3 * i, obs + 3 * i, 3 * sizeof(float));
        }
        start_episode(i, obs);
      }
    }
  }

  void start_episode(int64_t i, float* obs) {
    theta_[i] = rngs_[i].uniform(-M_PI, M_PI);
    theta_dot_[i] = rngs_[i].uniform(-1.0, 1.0);
    steps_[i] = 0;
    observe(i, obs);
  }

  void observe(int64_t i, float* obs) const {
    obs[3 * i + 0] = static_cast<float>(std::cos(theta_[i]));
    obs[3 * i + 1] = static_cast<float>(std::sin(theta_[i]));
    obs[3 * i + 2] = static_cast<float>(theta_dot_[i]);
  }

  const int64_t limit_;
  std::vector<double> theta_, theta_dot_;  // [K]
  std::vector<int64_t> steps_;             // [K]
  std::vector<Rng> rngs_;                  // [K]
};

}  // namespace pronghorn::envs
