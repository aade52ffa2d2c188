// ActorWatchdog on made-up times: crash loops and stalls end the job, kills
// from outside and a learner with no actor wanted do not.
#include "learner/actor_watchdog.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;
using Clock = ActorWatchdog::Clock;

// The message check() throws at `now`, or "" when the job may go on.
std::string verdict(const ActorWatchdog& w, Clock::time_point now) {
  try {
    w.check(now);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const Clock::time_point t0{};

TEST(ActorWatchdogTest, CrashesInARowWithNoUnrollEndTheJobNamingTheLast) {
  ActorWatchdog w({.max_crashes = 3, .stall_timeout = 0s}, t0);
  w.observe(0, 2, t0);
  w.died("actor 0 killed by SIGSEGV", true);
  w.died("actor 1 killed by SIGSEGV", true);
  EXPECT_EQ(verdict(w, t0 + 1s), "");
  w.died("actor 0 exited 1: env plugin x.so (env \"corridor\"): step failed: reward NaN", true);
  EXPECT_EQ(verdict(w, t0 + 2s),
            "actors keep crashing: 3 in a row with no unroll committed; last: actor 0 exited 1: "
            "env plugin x.so (env \"corridor\"): step failed: reward NaN (actor.max_crashes = 3)");
}

TEST(ActorWatchdogTest, AnUnrollCommittedBetweenCrashesStartsTheCountOver) {
  ActorWatchdog w({.max_crashes = 2, .stall_timeout = 0s}, t0);
  w.observe(0, 1, t0);
  w.died("actor 0 killed by SIGSEGV", true);
  w.observe(1, 1, t0 + 1s);  // one unroll
  w.died("actor 0 killed by SIGSEGV", true);
  EXPECT_EQ(w.crashes_in_a_row(), 1);
  EXPECT_EQ(verdict(w, t0 + 2s), "");
  w.died("actor 0 killed by SIGABRT", true);
  EXPECT_NE(verdict(w, t0 + 3s).find("2 in a row"), std::string::npos);
}

TEST(ActorWatchdogTest, KillsFromOutsideAreNoCrash) {
  ActorWatchdog w({.max_crashes = 2, .stall_timeout = 60s}, t0);
  w.observe(0, 1, t0);
  for (int i = 0; i < 100; ++i) w.died("actor 0 killed by SIGKILL", false);
  EXPECT_EQ(w.crashes_in_a_row(), 0);
  EXPECT_EQ(verdict(w, t0 + 20s), "") << "a kill storm is not a broken env";
}

TEST(ActorWatchdogTest, NoUnrollForTheTimeoutEndsTheJobWithTheFirstUnrollAllowedLonger) {
  ActorWatchdog w({.max_crashes = 5, .stall_timeout = 10s}, t0);
  // Before the first unroll the actors load LibTorch: timeout + allowance.
  for (auto t = 0s; t <= 10s + ActorWatchdog::kStartAllowance; t += 1s) w.observe(0, 1, t0 + t);
  EXPECT_EQ(verdict(w, t0 + 10s + ActorWatchdog::kStartAllowance), "");
  const auto late = t0 + 11s + ActorWatchdog::kStartAllowance;
  w.observe(0, 1, late);
  EXPECT_NE(verdict(w, late).find("actors stalled: no unroll committed for 71 s with 1 actor "
                                  "wanted (since they started)"),
            std::string::npos)
      << verdict(w, late);

  ActorWatchdog v({.max_crashes = 5, .stall_timeout = 10s}, t0);
  v.observe(1, 2, t0 + 1s);  // the first unroll: from now on, the timeout alone
  for (auto t = 2s; t <= 11s; t += 1s) v.observe(1, 2, t0 + t);
  EXPECT_EQ(verdict(v, t0 + 11s), "");
  v.died("actor 1 killed by SIGKILL", false);
  v.observe(1, 2, t0 + 12s);
  EXPECT_EQ(verdict(v, t0 + 12s),
            "actors stalled: no unroll committed for 11 s with 2 actors wanted; last: actor 1 "
            "killed by SIGKILL (actor.stall_timeout_s = 10)");
}

TEST(ActorWatchdogTest, ALearnerWithNoActorWantedIsNotStalled) {
  ActorWatchdog w({.max_crashes = 5, .stall_timeout = 1s}, t0);
  w.observe(5, 1, t0);
  std::chrono::milliseconds t = 0s;
  for (; t < 600s; t += 100ms) w.observe(5, 0, t0 + t);  // scaled to 0
  EXPECT_EQ(verdict(w, t0 + t), "");
  // Wanted again: the new actors load LibTorch first.
  for (; t < 630s; t += 100ms) w.observe(5, 1, t0 + t);
  EXPECT_EQ(verdict(w, t0 + t), "");
  for (; t < 662s; t += 100ms) w.observe(5, 1, t0 + t);
  EXPECT_NE(verdict(w, t0 + t).find("actors stalled"), std::string::npos);
}

TEST(ActorWatchdogTest, ALoopAwayLongerThanHalfTheTimeoutDoesNotBlameTheActors) {
  ActorWatchdog w({.max_crashes = 5, .stall_timeout = 10s}, t0);
  w.observe(1, 1, t0);
  w.observe(1, 1, t0 + 8s);  // one long learner step: the ring was full meanwhile
  EXPECT_EQ(verdict(w, t0 + 12s), "");
  for (auto t = 8s; t <= 19s; t += 1s) w.observe(1, 1, t0 + t);
  EXPECT_NE(verdict(w, t0 + 19s).find("actors stalled"), std::string::npos);
}

TEST(ActorWatchdogTest, ZeroLimitsNeverEndTheJob) {
  ActorWatchdog w({.max_crashes = 0, .stall_timeout = 0s}, t0);
  w.observe(0, 4, t0);
  for (int i = 0; i < 1000; ++i) w.died("actor 0 killed by SIGSEGV", true);
  for (auto t = 0s; t < 3600s; t += 1s) w.observe(0, 4, t0 + t);
  EXPECT_EQ(verdict(w, t0 + 3600s), "");
}

}  // namespace
}  // namespace pronghorn::learner
