// The supervisor with /bin/sh for actors (`sh -c SCRIPT --actor-id i`: the
// script's $1 is the actor's index): what it passes on from their stderr,
// which deaths are crashes, how it paces starts, and what it leaves behind.
#include "fleet/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace pronghorn::fleet {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// This process's children: the actors of the supervisor under test.
std::vector<pid_t> children() {
  std::ifstream in("/proc/self/task/" + std::to_string(getpid()) + "/children");
  std::vector<pid_t> out;
  for (pid_t pid; in >> pid;) out.push_back(pid);
  return out;
}

SupervisorOptions shell(int64_t max_crashes = 5) {
  return {.program = "/bin/sh", .limits = {.max_crashes = max_crashes, .stall_timeout = 0s}};
}

// Polls `s` until it throws or `timeout` passes; the message, or "".
std::string poll_until_it_ends(Supervisor& s, Clock::duration timeout = 20s) {
  const auto deadline = Clock::now() + timeout;
  try {
    while (Clock::now() < deadline) {
      s.poll(0);
      std::this_thread::sleep_for(10ms);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SupervisorTest, PassesActorLinesOnUnchangedAndEndsTheJobWithTheLastOne) {
  ::testing::internal::CaptureStderr();
  std::string message;
  {
    Supervisor s(
        {"-c", "echo \"actor $1 says hello\" >&2; echo 'pronghorn: env broke' >&2; exit 1"}, 1,
        shell(2));
    message = poll_until_it_ends(s);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(message,
            "actors keep crashing: 2 in a row with no unroll committed; last: actor 0 exited 1: "
            "env broke (actor.max_crashes = 2)");
  EXPECT_NE(err.find("actor 0 says hello\npronghorn: env broke\n"), std::string::npos) << err;
}

TEST(SupervisorTest, ASignalTheActorRaisedIsACrashAndAKillFromOutsideIsNot) {
  {
    Supervisor s({"-c", "kill -SEGV $$"}, 1, shell(2));
    EXPECT_EQ(poll_until_it_ends(s),
              "actors keep crashing: 2 in a row with no unroll committed; last: actor 0 killed by "
              "SIGSEGV (actor.max_crashes = 2)");
  }
  Supervisor s({"-c", "exec sleep 30"}, 2, shell(1));
  int kills = 0;
  // Each actor killed once: on a loaded machine one may not have died (or
  // been reaped) by the next poll, and a second kill of it is no new restart.
  std::set<pid_t> killed;
  const auto deadline = Clock::now() + 20s;
  while (kills < 20 && Clock::now() < deadline) {
    s.poll(0);  // throws if a kill counted as a crash (max_crashes = 1)
    if (s.alive() == 2) {
      for (pid_t pid : children()) {
        if (killed.insert(pid).second) kills += kill(pid, kills % 2 ? SIGKILL : SIGTERM) == 0;
      }
    }
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_GE(kills, 20);
  // Every killed actor restarted (a kill from outside is no crash), at once:
  // no back-off.
  const auto restarted = [&] {
    return s.alive() == 2 && s.restarts() >= static_cast<decltype(s.restarts())>(kills);
  };
  for (auto end = Clock::now() + 5s; !restarted() && Clock::now() < end;) {
    std::this_thread::sleep_for(10ms);
    s.poll(0);
  }
  EXPECT_TRUE(restarted()) << s.restarts() << " restarts after " << kills << " kills";
}

TEST(SupervisorTest, EachPollStartsActorsOnlyForItsBudget) {
  SupervisorOptions options = shell();
  options.start_budget = Clock::duration::zero();  // one start per poll
  Supervisor s({"-c", "exec sleep 30"}, 3, options);
  EXPECT_EQ(s.alive(), 1) << "the constructor starts the first";
  s.poll(0);
  EXPECT_EQ(s.alive(), 2);
  s.poll(0);
  EXPECT_EQ(s.alive(), 3);
  s.scale(6, true);
  EXPECT_EQ(s.desired(), 6);
  EXPECT_EQ(s.alive(), 4);
  for (int i = 0; i < 5; ++i) s.poll(0);
  EXPECT_EQ(s.alive(), 6);
  EXPECT_EQ(s.restarts(), 0u);
}

TEST(SupervisorTest, ActorsEndingAfterHoldRestartsAreNeitherRestartedNorCounted) {
  Supervisor s({"-c", "exec sleep 30"}, 2, shell(1));
  for (auto end = Clock::now() + 5s; s.alive() < 2 && Clock::now() < end;) s.poll(0);
  ASSERT_EQ(s.alive(), 2);
  s.hold_restarts();
  for (pid_t pid : children()) kill(pid, SIGTERM);
  for (auto end = Clock::now() + 5s; s.alive() > 0 && Clock::now() < end;) {
    s.poll(0);  // would throw on a crash counted (max_crashes = 1)
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(s.alive(), 0);
  for (int i = 0; i < 10; ++i) s.poll(0);
  EXPECT_EQ(s.alive(), 0) << "nothing starts again";
  EXPECT_EQ(s.restarts(), 0u);
  EXPECT_TRUE(children().empty());
}

TEST(SupervisorTest, StopLeavesNoActorEvenOneIgnoringSigterm) {
  Supervisor s({"-c", "trap '' TERM; exec sleep 30"}, 2, shell());
  ASSERT_EQ(children().size(), 2u);
  const auto start = Clock::now();
  s.stop(300ms);
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_TRUE(children().empty());
  EXPECT_EQ(s.alive(), 0);
  s.poll(0);
  EXPECT_EQ(s.alive(), 0) << "nothing starts after stop()";
}

}  // namespace
}  // namespace pronghorn::fleet
