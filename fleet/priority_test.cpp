// actor.nice: "auto" resolved by whether the learner is one of several, the
// actor's command line carrying it, and lower_priority() reaching every
// thread of the process, the ones it starts later included, without ever
// raising a priority. Its own binary: the tests fork, and no other test's
// thread may exist in the process then.
#include "fleet/priority.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fleet/actor_command.h"

namespace pronghorn::fleet {
namespace {

TEST(PriorityTest, AutoIsTenInAClusterAndZeroAlone) {
  ActorConfig actor;
  EXPECT_EQ(actor_nice(actor, /*cluster=*/true), 10);
  EXPECT_EQ(actor_nice(actor, /*cluster=*/false), 0);
  actor.nice = 3;
  EXPECT_EQ(actor_nice(actor, true), 3);
  EXPECT_EQ(actor_nice(actor, false), 3);
  actor.nice = 0;
  EXPECT_EQ(actor_nice(actor, true), 0) << "0 keeps a cluster's actors at the default";
}

TEST(PriorityTest, TheActorsCommandLineCarriesItsNiceValue) {
  const auto flag_of = [](const std::vector<std::string>& args) {
    const auto at = std::find(args.begin(), args.end(), kNiceFlag);
    return at == args.end() || at + 1 == args.end() ? std::string("none") : *(at + 1);
  };
  ActorTarget target{.ring = "/ring", .slab = "/slab", .config_path = "config.toml"};
  target.nice = 10;
  EXPECT_EQ(flag_of(actor_process_args(target)), "10");
  target.nice = 0;
  EXPECT_EQ(flag_of(actor_process_args(target)), "none") << "0: the flag is left out";
}

int nice_of_thread(pid_t tid) { return getpriority(PRIO_PROCESS, static_cast<id_t>(tid)); }

// Runs `body` in a forked child and expects it to exit 0.
void in_child(const std::function<bool()>& body, const char* what) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(body() ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << what;
}

TEST(PriorityTest, LowersEveryThreadAndWhatTheyStartAfter) {
  // Never above where the test started: lower_priority does not raise it.
  const int want = std::max(7, nice_of_thread(getpid()));
  in_child(
      [want] {
        std::atomic<pid_t> before_tid{0};
        std::atomic<bool> go{false};
        std::thread before([&] {
          before_tid = static_cast<pid_t>(syscall(SYS_gettid));
          while (!go) std::this_thread::yield();
        });
        while (before_tid == 0) std::this_thread::yield();
        lower_priority(7);
        int after = -1;
        std::thread([&] {
          after = nice_of_thread(static_cast<pid_t>(syscall(SYS_gettid)));
        }).join();
        const bool ok =
            nice_of_thread(getpid()) == want && nice_of_thread(before_tid) == want && after == want;
        go = true;
        before.join();
        return ok;
      },
      "a thread of the child, or one it started after, kept its nice value");
}

TEST(PriorityTest, NeverRaisesAPriority) {
  in_child(
      [] {
        if (setpriority(PRIO_PROCESS, 0, 15) != 0) return false;
        lower_priority(10);
        return nice_of_thread(getpid()) == 15;
      },
      "a process started at nice 15 was raised to 10");
}

}  // namespace
}  // namespace pronghorn::fleet
