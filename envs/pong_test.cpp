#include "envs/pong.h"

#include <gtest/gtest.h>

#include "envs/testing/buffers.h"

namespace pronghorn::envs {
namespace {

constexpr int kSize = Pong::kSize;

// Where the brightest pixels are: the agent paddle's centre row and the ball.
struct Seen {
  double paddle_row = -1;
  int ball_row = -1, ball_col = -1;
  int trail = 0;
};
Seen look(const uint8_t* frame) {
  Seen s;
  int paddle_pixels = 0;
  double paddle_sum = 0;
  for (int r = 0; r < kSize; ++r) {
    for (int c = 0; c < kSize; ++c) {
      uint8_t v = frame[r * kSize + c];
      if (c == Pong::kAgentColumn && v == 255) paddle_sum += r, ++paddle_pixels;
      if (c != Pong::kAgentColumn && c != Pong::kOpponentColumn && v == 255) {
        s.ball_row = r, s.ball_col = c;
      }
      s.trail += v == 128;
    }
  }
  if (paddle_pixels > 0) s.paddle_row = paddle_sum / paddle_pixels;
  return s;
}

// Mean return over finished episodes of K envs driven by `policy`.
template <typename Policy>
double mean_return(Policy policy, int64_t k, int steps, int* episodes) {
  Pong env(k, 17, 0);
  Buffers buf(env.spec(), k);
  env.reset(buf.obs.data());
  std::vector<int32_t> actions(k);
  std::vector<double> running(k);
  double total = 0;
  *episodes = 0;
  for (int t = 0; t < steps; ++t) {
    for (int64_t i = 0; i < k; ++i) actions[i] = policy(buf.obs.data() + i * kSize * kSize, t, i);
    env.step(actions.data(), buf.out());
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_TRUE(buf.rewards[i] == 0 || buf.rewards[i] == 1 || buf.rewards[i] == -1);
      running[i] += buf.rewards[i];
      if (buf.terminated[i] || buf.truncated[i]) total += running[i], running[i] = 0, ++*episodes;
    }
  }
  return *episodes ? total / *episodes : 0;
}

TEST(PongTest, FrameShowsTwoPaddlesAndTheBall) {
  Pong env(1, 3, 0);
  EXPECT_EQ(env.spec().obs_shape, (std::vector<int64_t>{1, kSize, kSize}));
  Buffers buf(env.spec(), 1);
  env.reset(buf.obs.data());
  int32_t stay = 0;
  env.step(&stay, buf.out());
  int on = 0;
  for (uint8_t v : buf.obs) on += v == 255;
  EXPECT_EQ(on, 6 + 6 + 1) << "two paddles of 6 pixels and the ball";
  Seen s = look(buf.obs.data());
  EXPECT_NEAR(s.paddle_row, kSize / 2.0, 1.0);
  EXPECT_GE(s.ball_row, 0);
  EXPECT_EQ(s.trail, 1) << "the ball's previous position";
}

TEST(PongTest, TrackingTheBallBeatsRandomPlay) {
  Rng rng(5, 5);
  int random_episodes = 0, tracking_episodes = 0;
  double random =
      mean_return([&](const uint8_t*, int, int64_t) { return static_cast<int32_t>(rng.below(3)); },
                  64, 3000, &random_episodes);
  double tracking = mean_return(
      [](const uint8_t* frame, int, int64_t) {
        Seen s = look(frame);
        if (s.ball_row < 0) return 0;
        return s.ball_row < s.paddle_row - 1 ? 1 : s.ball_row > s.paddle_row + 1 ? 2 : 0;
      },
      64, 3000, &tracking_episodes);
  EXPECT_GT(random_episodes, 50);
  EXPECT_GT(tracking_episodes, 20);
  EXPECT_LT(random, -2.0) << "a random player loses almost every point";
  EXPECT_GT(tracking, random + 3.0) << "a player who follows the ball wins";
}

TEST(PongTest, EpisodeEndsAtThreePointsWithTheLastFrameKept) {
  Pong env(1, 8, 0);
  Buffers buf(env.spec(), 1);
  env.reset(buf.obs.data());
  int32_t stay = 0;
  int points = 0;
  for (int t = 0; t < 2000 && !buf.terminated[0]; ++t) {
    env.step(&stay, buf.out());
    points += buf.rewards[0] != 0;
  }
  ASSERT_TRUE(buf.terminated[0]);
  EXPECT_GE(points, 3);
  EXPECT_LE(points, 5);
  EXPECT_NE(buf.final_obs, buf.obs) << "final frame differs from the new episode's first";
}

TEST(PongTest, SameSeedSameFrames) {
  auto run = [](uint64_t seed) {
    Pong env(4, seed, 0);
    Buffers buf(env.spec(), 4);
    env.reset(buf.obs.data());
    std::vector<int32_t> actions(4);
    for (int t = 0; t < 500; ++t) {
      for (int i = 0; i < 4; ++i) actions[i] = (t + i) % 3;
      env.step(actions.data(), buf.out());
    }
    return buf.obs;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

}  // namespace
}  // namespace pronghorn::envs
