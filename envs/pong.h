// Pong against a scripted opponent, observed as pixels: the pixel env, for the
// IMPALA CNN. The agent's paddle is on the right, the opponent's on the left;
// the ball bounces off the top and bottom walls and off paddles, leaving at
// an angle set by where it hit the paddle (so a player can aim). The opponent
// follows the ball at a capped speed, so steep shots beat it.
//
// Observation: uint8 [1, 32, 32], 0 background, 255 paddles and ball, 128 the
// ball's previous position (a trail, so one frame shows the ball's motion).
// Actions: 0 stay, 1 up, 2 down. Reward +1 when the opponent misses, −1 when
// the agent misses. Terminated when either side reaches 3 points; truncated
// at 2000 steps. A random policy scores about −2.2. Test: envs/pong_test.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "envs/env.h"
#include "envs/rng.h"

namespace pronghorn::envs {

class Pong final : public BatchEnv {
 public:
  static constexpr int kSize = 32;            // the frame is kSize × kSize
  static constexpr float kPaddleHalf = 3.0f;  // paddles are 6 pixels tall
  static constexpr float kAgentSpeed = 1.5f;  // pixels per step
  static constexpr float kOpponentSpeed = 0.7f;
  static constexpr float kBallSpeedX = 1.2f;
  static constexpr int kAgentColumn = kSize - 2;
  static constexpr int kOpponentColumn = 1;
  static constexpr int kPointsToWin = 3;
  static constexpr int64_t kMaxEpisodeSteps = 2000;

  static EnvSpec make_spec(int64_t max_episode_steps) {
    EnvSpec spec;
    spec.name = "pong";
    spec.obs_dtype = Dtype::kUInt8;
    spec.obs_shape = {1, kSize, kSize};
    spec.action_kind = ActionKind::kDiscrete;
    spec.action_size = 3;
    spec.max_episode_steps = max_episode_steps > 0 ? max_episode_steps : kMaxEpisodeSteps;
    spec.target_return = 1.0;  // solved: configs/pong.toml's
    return spec;
  }

  Pong(int64_t num_envs, uint64_t seed, int64_t max_episode_steps)
      : BatchEnv(make_spec(max_episode_steps), num_envs),
        limit_(spec().max_episode_steps),
        games_(num_envs) {
    for (int64_t i = 0; i < num_envs; ++i) games_[i].rng = Rng(seed, static_cast<uint64_t>(i));
  }

 private:
  static constexpr size_t kFrameBytes = kSize * kSize;

  struct Game {
    float ball_x, ball_y, ball_dx, ball_dy;
    float prev_x, prev_y;
    float agent_y, opponent_y;  // paddle centres
    int agent_points, opponent_points;
    int64_t steps;
    Rng rng;
  };

  void reset_unchecked(void* obs) override {
    for (int64_t i = 0; i < num_envs(); ++i) start_episode(i, static_cast<uint8_t*>(obs));
  }

  void step_unchecked(const void* actions, const StepOutput& out) override {
    const int32_t* action = static_cast<const int32_t*>(actions);
    uint8_t* obs = static_cast<uint8_t*>(out.obs);
    for (int64_t i = 0; i < num_envs(); ++i) {
      Game& g = games_[i];
      const float move = action[i] == 1 ? -kAgentSpeed : action[i] == 2 ? kAgentSpeed : 0.0f;
      g.agent_y = std::clamp(g.agent_y + move, kPaddleHalf, kSize - kPaddleHalf);
      const float chase = std::clamp(g.ball_y - g.opponent_y, -kOpponentSpeed, kOpponentSpeed);
      g.opponent_y = std::clamp(g.opponent_y + chase, kPaddleHalf, kSize - kPaddleHalf);
      const float reward = move_ball(g);
      if (reward > 0) ++g.agent_points;
      if (reward < 0) ++g.opponent_points;
      out.rewards[i] = reward;
      out.terminated[i] = g.agent_points >= kPointsToWin || g.opponent_points >= kPointsToWin;
      out.truncated[i] = ++g.steps >= limit_;
      draw(g, obs + i * kFrameBytes);
      if (out.terminated[i] || out.truncated[i]) {
        if (out.final_obs != nullptr) {
          std::memcpy(static_cast<uint8_t*>(out.final_obs) + i * kFrameBytes, obs + i * kFrameBytes,
                      kFrameBytes);
        }
        start_episode(i, obs);
      }
    }
  }

  // Moves the ball one step; returns +1 or −1 when a point ends, else 0.
  static float move_ball(Game& g) {
    g.prev_x = g.ball_x;
    g.prev_y = g.ball_y;
    g.ball_x += g.ball_dx;
    g.ball_y += g.ball_dy;
    if (g.ball_y < 0) g.ball_y = -g.ball_y, g.ball_dy = -g.ball_dy;
    if (g.ball_y > kSize - 1) g.ball_y = 2 * (kSize - 1) - g.ball_y, g.ball_dy = -g.ball_dy;
    if (g.ball_dx > 0 && g.ball_x >= kAgentColumn) {
      if (!bounce(g, g.agent_y, kAgentColumn)) return serve(g, -1), -1.0f;
    } else if (g.ball_dx < 0 && g.ball_x <= kOpponentColumn) {
      if (!bounce(g, g.opponent_y, kOpponentColumn)) return serve(g, +1), 1.0f;
    }
    return 0.0f;
  }

  // Returns the ball from the paddle at `column` if it is there to meet it.
  static bool bounce(Game& g, float paddle_y, int column) {
    const float offset = (g.ball_y - paddle_y) / kPaddleHalf;  // −1 … 1 on the paddle
    if (std::fabs(offset) > 1.15f) return false;
    g.ball_x = 2.0f * column - g.ball_x;
    g.ball_dx = -g.ball_dx;
    g.ball_dy = std::clamp(g.ball_dy * 0.5f + 1.2f * offset, -1.6f, 1.6f);
    return true;
  }

  // A new ball from the centre, towards `toward` (+1 the agent, −1 the opponent).
  static void serve(Game& g, int toward) {
    g.ball_x = g.prev_x = kSize / 2.0f;
    g.ball_y = g.prev_y = static_cast<float>(g.rng.uniform(8.0, kSize - 8.0));
    g.ball_dx = toward * kBallSpeedX;
    g.ball_dy = static_cast<float>(g.rng.uniform(-0.8, 0.8));
  }

  void start_episode(int64_t i, uint8_t* obs) {
    Game& g = games_[i];
    g.agent_y = g.opponent_y = kSize / 2.0f;
    g.agent_points = g.opponent_points = 0;
    g.steps = 0;
    serve(g, g.rng.below(2) == 0 ? 1 : -1);
    draw(g, obs + i * kFrameBytes);
  }

  static void draw(const Game& g, uint8_t* frame) {
    std::memset(frame, 0, kFrameBytes);
    auto pixel = [frame](float x, float y) -> uint8_t& {
      int col = std::clamp(static_cast<int>(std::lround(x)), 0, kSize - 1);
      int row = std::clamp(static_cast<int>(std::lround(y)), 0, kSize - 1);
      return frame[row * kSize + col];
    };
    for (int d = -static_cast<int>(kPaddleHalf); d < static_cast<int>(kPaddleHalf); ++d) {
      pixel(kAgentColumn, g.agent_y + d + 0.5f) = 255;
      pixel(kOpponentColumn, g.opponent_y + d + 0.5f) = 255;
    }
    pixel(g.prev_x, g.prev_y) = 128;
    pixel(g.ball_x, g.ball_y) = 255;
  }

  const int64_t limit_;
  std::vector<Game> games_;  // [K]
};

}  // namespace pronghorn::envs
