// What the run reports of env.episode_info (RunStats, make_status,
// metrics.jsonl, TensorBoard): each key's mean over the last episodes that
// gave it, computed here by hand.
#include "learner/run_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "learner/run_status.h"
#include "learner/tensorboard_writer.h"
#include "proto/status_json.h"

namespace pronghorn::learner {
namespace {

constexpr float kNone = std::numeric_limits<float>::quiet_NaN();

// A batch of `returns.size()` episodes with two numbers each.
Batch episodes(const std::vector<float>& returns, const std::vector<float>& info) {
  Batch b;
  b.episode_returns = returns;
  b.episode_lengths.assign(returns.size(), 10);
  b.episode_info = info;
  return b;
}

TEST(RunStatsTest, EpisodeInfoIsEachKeysMeanOverTheEpisodesThatGaveIt) {
  RunStats stats;
  stats.episode_info_keys = {"score", "absent"};
  const float inf = std::numeric_limits<float>::infinity();
  stats.add(episodes({1, 2, 3, 4}, {10, kNone, kNone, kNone, 40, kNone, inf, -inf}), StepStats{}, 1,
            30);
  EXPECT_DOUBLE_EQ(stats.episode_info_mean(0), 25.0)
      << "(10 + 40) / 2: the NaN is no episode, nor is inf";
  EXPECT_TRUE(std::isnan(stats.episode_info_mean(1)));
  // Past kRecentEpisodes values only the last ones count.
  for (int i = 0; i < 150; ++i) stats.add(episodes({0}, {100, kNone}), StepStats{}, 1, 10);
  EXPECT_DOUBLE_EQ(stats.episode_info_mean(0), 100.0);
  EXPECT_EQ(stats.recent_info[0].size(), kRecentEpisodes);

  const v1::Status status = make_status(stats, LiveState{});
  ASSERT_EQ(status.episode_info().size(), 1) << "a key no episode gave is absent";
  EXPECT_DOUBLE_EQ(status.episode_info().at("score"), 100.0);
  const std::string json = status_json(status);
  EXPECT_NE(json.find("\"episode_info\": {\"score\": 100}"), std::string::npos) << json;
  std::map<std::string, double> tags;
  for (const Scalar& s : status_scalars(status)) tags[s.tag] = s.value;
  EXPECT_EQ(tags.at("train/episode_info/score"), 100.0);
}

TEST(RunStatsTest, NoEpisodeInfoKeysReportNone) {
  RunStats stats;
  stats.add(episodes({1, 2}, {}), StepStats{}, 1, 20);
  const v1::Status status = make_status(stats, LiveState{});
  EXPECT_TRUE(status.episode_info().empty());
  EXPECT_NE(status_json(status).find("\"episode_info\": {}"), std::string::npos);
}

}  // namespace
}  // namespace pronghorn::learner
