// ActorWatchdog on made-up times: crash loops and stalls end the job, kills
// from outside and a learner with no actor wanted do not.
#include "fleet/actor_watchdog.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace pronghorn::fleet {
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

// An env that fails every 50 steps: each actor life commits unrolls before
// it crashes, so no streak ever builds; the rate ends the job.
TEST(ActorWatchdogTest, CrashesBetweenUnrollsEndTheJobPastTheRate) {
  ActorWatchdog w({.max_crashes = 5, .stall_timeout = 0s, .max_crash_rate = 0.2}, t0);
  auto t = t0;
  uint64_t committed = 0;
  for (int life = 0; life < 4; ++life) {
    t += 1s;
    committed += 3;  // three unrolls, then the crash
    w.observe(committed, 1, t);
    w.died("actor 0 exited 1: step failed", true);
    EXPECT_EQ(verdict(w, t), "") << "life " << life;
  }
  EXPECT_EQ(w.crashes_in_a_row(), 1) << "no streak";
  EXPECT_EQ(w.crash_rate_warning(t),
            "actors crashing: 4 crashes against 12 unrolls in the last 4 s (the job ends past "
            "0.2 per unroll, actor.max_crash_rate)");
  t += 1s;
  w.observe(committed + 3, 1, t);
  w.died("actor 0 exited 1: step failed at 50", true);
  EXPECT_EQ(verdict(w, t),
            "actors crash too often: 5 crashes against 15 unrolls committed in the last 5 s; "
            "last: actor 0 exited 1: step failed at 50 (actor.max_crash_rate = 0.2 per unroll)");
}

TEST(ActorWatchdogTest, RareCrashesAmongManyUnrollsAreWithinTheRate) {
  ActorWatchdog w({.max_crashes = 5, .stall_timeout = 0s, .max_crash_rate = 0.2}, t0);
  for (int i = 1; i <= 40; ++i) {
    w.observe(static_cast<uint64_t>(i) * 12, 4, t0 + i * 1s);
    w.died("actor 1 killed by SIGSEGV", true);  // one crash per 12 unrolls
    EXPECT_EQ(verdict(w, t0 + i * 1s), "") << i;
  }
  EXPECT_EQ(w.crash_rate_warning(t0 + 40s), "") << "1/12 per unroll is under half the limit";
}

TEST(ActorWatchdogTest, CrashesLeaveTheRateWindow) {
  ActorWatchdog w({.max_crashes = 0,  // the rate alone
                   .stall_timeout = 0s,
                   .max_crash_rate = 0.2,
                   .crash_window = 10s},
                  t0);
  // 4 crashes every 20 s, one unroll between bursts: never 5 within 10 s,
  // though 20 pile up.
  for (int burst = 0; burst < 5; ++burst) {
    const auto t = t0 + burst * 20s;
    w.observe(static_cast<uint64_t>(burst), 1, t);  // one unroll a burst: no streak
    for (int i = 0; i < 4; ++i) w.died("actor 0 killed by SIGABRT", true);
    EXPECT_EQ(verdict(w, t), "") << burst;
  }
  const auto t = t0 + 81s;
  w.observe(4, 1, t);
  w.died("actor 0 killed by SIGABRT", true);  // 5 within 10 s
  EXPECT_NE(verdict(w, t).find("actors crash too often: 5 crashes against 0 unrolls committed in "
                               "the last 1 s"),
            std::string::npos)
      << verdict(w, t);
}

TEST(ActorWatchdogTest, WatchdogLimitsComeFromTheActorConfig) {
  ActorConfig c;
  c.max_crashes = 7;
  c.stall_timeout_s = 2.5;
  c.max_crash_rate = 0.3;
  c.crash_window_s = 30;
  const ActorWatchdog::Limits l = watchdog_limits(c);
  EXPECT_EQ(l.max_crashes, 7);
  EXPECT_EQ(l.stall_timeout, 2500ms);
  EXPECT_EQ(l.max_crash_rate, 0.3);
  EXPECT_EQ(l.crash_window, 30s);
  EXPECT_EQ(watchdog_limits(c, /*stall=*/false).stall_timeout, 0s);
}

}  // namespace
}  // namespace pronghorn::fleet
