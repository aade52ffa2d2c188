// actor.nice: "auto" resolved by whether the learner is one of several, and
// lower_priority() reaching every thread of the process, the ones it starts
// later included.
#include "fleet/priority.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

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

int nice_of_thread(pid_t tid) {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
}

// In a child process: the test process's own priority must not change.
TEST(PriorityTest, LowersEveryThreadAndWhatTheyStartAfter) {
  const int mine = nice_of_thread(getpid());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pid_t before_tid = 0;
    bool go = false;
    std::thread before([&] {
      before_tid = static_cast<pid_t>(syscall(SYS_gettid));
      while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) std::this_thread::yield();
    });
    while (__atomic_load_n(&before_tid, __ATOMIC_ACQUIRE) == 0) std::this_thread::yield();
    lower_priority(7);
    int after = -1;
    std::thread([&] { after = nice_of_thread(static_cast<pid_t>(syscall(SYS_gettid))); }).join();
    const bool ok = nice_of_thread(getpid()) == 7 && nice_of_thread(before_tid) == 7 && after == 7;
    __atomic_store_n(&go, true, __ATOMIC_RELEASE);
    before.join();
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "a thread of the child kept its nice value";
  EXPECT_EQ(nice_of_thread(getpid()), mine) << "the test process itself is untouched";
}

}  // namespace
}  // namespace pronghorn::fleet
