// The health line: quiet while steps move and actors live; actors that keep
// dying named; a stall named only after enough reports and seconds, and
// not while acting is paused (scaled to 0).
#include "learner/job_health.h"

#include <gtest/gtest.h>

namespace pronghorn::learner {
namespace {

const HealthLimits kLimits{
    .restarts = 3, .restart_window_s = 60, .stalled_reports = 5, .stalled_min_s = 10};

TEST(JobHealthTest, QuietWhileStepsMoveAndActorsLive) {
  JobHealth h(kLimits);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(h.observe(i * 2.0, 1000u * i, 1, 4), "");
}

TEST(JobHealthTest, ActorsThatKeepDyingAreNamedThenForgotten) {
  JobHealth h(kLimits);
  EXPECT_EQ(h.observe(0, 0, 0, 4), "");
  EXPECT_EQ(h.observe(1, 100, 1, 4), "");
  EXPECT_EQ(h.observe(2, 200, 2, 4), "");
  const std::string line = h.observe(3, 300, 3, 4);
  EXPECT_NE(line.find("actors keep dying: 3 restarts in the last 60 s"), std::string::npos) << line;
  EXPECT_EQ(h.observe(70, 400, 3, 4), "") << "no restart within the last minute";
}

TEST(JobHealthTest, AStallIsNamedAfterEnoughReportsAndSeconds) {
  JobHealth h(kLimits);
  EXPECT_EQ(h.observe(0, 500, 0, 2), "");
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(h.observe(i, 500, 0, 2), "") << "not yet 10 s";
  for (int i = 6; i < 10; ++i) EXPECT_EQ(h.observe(i, 500, 0, 2), "");
  const std::string line = h.observe(10, 500, 0, 2);
  EXPECT_NE(line.find("env steps have not moved for 10 s (10 reports) at 500"), std::string::npos)
      << line;
  EXPECT_EQ(h.observe(11, 600, 0, 2), "") << "moving again";
  for (int i = 12; i < 40; ++i) EXPECT_EQ(h.observe(i, 600, 0, 0), "") << "acting paused";
}

}  // namespace
}  // namespace pronghorn::learner
