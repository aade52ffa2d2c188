#include "envs/pendulum.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "envs/testing/buffers.h"

namespace pronghorn::envs {
namespace {

// Gymnasium Pendulum-v1's step from its source, in double: (reward, θ', θ̇').
struct Next {
  double reward, theta, theta_dot;
};
Next gymnasium_step(double th, double thdot, double u) {
  const double g = 10.0, m = 1.0, l = 1.0, dt = 0.05, max_speed = 8, max_torque = 2.0;
  u = std::clamp(u, -max_torque, max_torque);
  double normalized = std::fmod(th + M_PI, 2 * M_PI);  // Python's % is floored
  if (normalized < 0) normalized += 2 * M_PI;
  normalized -= M_PI;
  double costs = normalized * normalized + 0.1 * thdot * thdot + 0.001 * u * u;
  double newthdot = thdot + (3 * g / (2 * l) * std::sin(th) + 3.0 / (m * l * l) * u) * dt;
  newthdot = std::clamp(newthdot, -max_speed, max_speed);
  return {-costs, th + newthdot * dt, newthdot};
}

TEST(PendulumTest, TransitionsMatchGymnasium) {
  const int64_t k = 32;
  Pendulum env(k, 4, 0);
  Buffers buf(env.spec(), k);
  env.reset(buf.obs.data());
  Rng rng(1, 1);
  std::vector<float> torque(k);
  for (int t = 0; t < 450; ++t) {
    std::vector<float> before(buf.obs_as<float>(), buf.obs_as<float>() + 3 * k);
    for (auto& u : torque) u = static_cast<float>(rng.uniform(-2, 2));
    env.step(torque.data(), buf.out());
    for (int64_t i = 0; i < k; ++i) {
      double th = std::atan2(before[3 * i + 1], before[3 * i]);
      Next want = gymnasium_step(th, before[3 * i + 2], torque[i]);
      const float* o =
          buf.truncated[i] ? buf.final_obs_as<float>() + 3 * i : buf.obs_as<float>() + 3 * i;
      ASSERT_NEAR(buf.rewards[i], want.reward, 1e-5 * (1 + std::fabs(want.reward))) << t;
      ASSERT_NEAR(o[0], std::cos(want.theta), 1e-5) << "env " << i << " step " << t;
      ASSERT_NEAR(o[1], std::sin(want.theta), 1e-5) << "env " << i << " step " << t;
      ASSERT_NEAR(o[2], want.theta_dot, 1e-5) << "env " << i << " step " << t;
      ASSERT_EQ(buf.terminated[i], 0);
      ASSERT_EQ(buf.truncated[i], (t + 1) % 200 == 0) << "env " << i << " step " << t;
    }
  }
}

TEST(PendulumTest, NormalizesAnglesLikePythonsFlooredModulo) {
  EXPECT_NEAR(Pendulum::normalize_angle(0.5), 0.5, 1e-12);
  EXPECT_NEAR(Pendulum::normalize_angle(3 * M_PI + 0.25), -M_PI + 0.25, 1e-12);
  EXPECT_NEAR(Pendulum::normalize_angle(-3 * M_PI - 0.25), M_PI - 0.25, 1e-12);
}

TEST(PendulumTest, OutOfBoundsTorqueIsAnError) {
  Pendulum env(2, 1, 0);
  Buffers buf(env.spec(), 2);
  env.reset(buf.obs.data());
  float torque[2] = {0.5f, 2.5f};
  try {
    env.step(torque, buf.out());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pendulum: action[0] = 2.5 of env 1"), std::string::npos)
        << e.what();
  }
  float nan_torque[2] = {NAN, 0.0f};
  EXPECT_THROW(env.step(nan_torque, buf.out()), Error);
}

}  // namespace
}  // namespace pronghorn::envs
