#include "envs/memory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "envs/testing/buffers.h"

namespace pronghorn::envs {
namespace {

// What an episode looks like from its observations alone: a cue first, then
// blanks, then a query whose answer alone is rewarded and ends the episode.
TEST(MemoryTest, OnlyTheAnswerToTheQueryNamingTheFirstCueIsRewarded) {
  const int64_t k = 16;
  Memory env(k, 5, 0);
  Buffers buf(env.spec(), k);
  env.reset(buf.obs.data());
  Rng rng(2, 2);
  std::vector<int32_t> actions(k), cue(k, -1), blanks(k, 0), episodes(k, 0);
  std::vector<int32_t> delays_seen(Memory::kMaxDelay + 1, 0);
  int64_t rewarded = 0, answered = 0;
  for (int t = 0; t < 3000; ++t) {
    const float* o = buf.obs_as<float>();
    std::vector<bool> query(k);
    for (int64_t i = 0; i < k; ++i) {
      const float* row = o + Memory::kObs * i;
      const int lit = (row[0] != 0) + (row[1] != 0) + (row[2] != 0);
      ASSERT_LE(lit, 1) << "env " << i << " step " << t;
      if (row[0] == 1 || row[1] == 1) {
        ASSERT_EQ(cue[i], -1) << "a cue only at an episode's first observation";
        cue[i] = row[1] == 1 ? 1 : 0;
      } else if (row[2] == 1) {
        query[i] = true;
      } else {
        ASSERT_NE(cue[i], -1) << "an episode starts with its cue";
        ++blanks[i];
      }
      actions[i] = static_cast<int32_t>(rng.below(Memory::kCues));
    }
    env.step(actions.data(), buf.out());
    for (int64_t i = 0; i < k; ++i) {
      ASSERT_EQ(buf.truncated[i], 0);
      ASSERT_EQ(buf.terminated[i], query[i] ? 1 : 0) << "the answer, and only it, ends the episode";
      const bool right = query[i] && actions[i] == cue[i];
      ASSERT_EQ(buf.rewards[i], right ? 1.0f : 0.0f) << "env " << i << " step " << t;
      if (query[i]) {
        ASSERT_GE(blanks[i], Memory::kMinDelay);
        ASSERT_LE(blanks[i], Memory::kMaxDelay);
        ++delays_seen[blanks[i]];
        rewarded += right;
        ++answered;
        cue[i] = -1;
        blanks[i] = 0;
      }
    }
  }
  for (int64_t d = Memory::kMinDelay; d <= Memory::kMaxDelay; ++d) {
    EXPECT_GT(delays_seen[d], 0) << "delay " << d << " never drawn";
  }
  // Random answers: right about half the time (some 5,500 episodes).
  EXPECT_NEAR(static_cast<double>(rewarded) / answered, 0.5, 0.03);
}

TEST(MemoryTest, TimeLimitTruncatesAndKeepsTheFinalObservation) {
  Memory env(2, 1, /*max_episode_steps=*/3);
  Buffers buf(env.spec(), 2);
  env.reset(buf.obs.data());
  const std::vector<int32_t> actions = {0, 1};
  for (int t = 0; t < 3; ++t) {
    env.step(actions.data(), buf.out());
    for (int i = 0; i < 2; ++i) ASSERT_EQ(buf.truncated[i], t == 2) << t;
  }
  const float* final_obs = buf.final_obs_as<float>();
  for (int j = 0; j < 6; ++j) EXPECT_EQ(final_obs[j], 0.0f) << "a blank step was cut";
  const float* obs = buf.obs_as<float>();
  EXPECT_EQ(obs[0] + obs[1], 1.0f) << "the next episode starts with its cue";
}

// Golden trajectory, seed 7: each env's cues, as 0/1, and the step each
// episode ended at, always answering 0. Changes only if the env changes.
TEST(MemoryTest, GoldenTrajectory) {
  Memory env(2, 7, 0);
  Buffers buf(env.spec(), 2);
  env.reset(buf.obs.data());
  const std::vector<int32_t> zeros = {0, 0};
  std::string trace;
  for (int t = 0; t < 40; ++t) {
    env.step(zeros.data(), buf.out());
    for (int i = 0; i < 2; ++i) {
      if (buf.terminated[i])
        trace += std::to_string(i) + "@" + std::to_string(t) + "r" +
                 std::to_string(static_cast<int>(buf.rewards[i])) + " ";
    }
  }
  EXPECT_EQ(trace, "1@7r0 0@11r1 1@16r1 0@20r0 1@23r0 0@29r1 1@32r0 0@36r1 1@39r1 ");
}

}  // namespace
}  // namespace pronghorn::envs
