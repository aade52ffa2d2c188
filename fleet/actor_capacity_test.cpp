// How many actors a node takes: 2 per core and what free memory holds, the
// refusal naming the cap and how to force it, and "auto".
#include "fleet/actor_capacity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/error.h"

namespace pronghorn::fleet {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

std::string refusal(int wanted, const ActorRoom& room) {
  try {
    check_actor_room(wanted, room, "scale --actors " + std::to_string(wanted), "pass --force");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ActorCapacityTest, TwoCoresHoldFourActors) {
  const ActorRoom room = actor_room({.cores = 2, .available_bytes = 20 * kGiB}, 1, 128 * kMiB);
  EXPECT_EQ(room.by_cores, 4);
  EXPECT_EQ(room.cap(), 4);
  EXPECT_EQ(refusal(4, room), "");
  EXPECT_EQ(refusal(500, room),
            "scale --actors 500: this node holds at most 4 actors (2 cores × 2 per core; memory: "
            "20.0 GiB free holds 128 more at about 128.0 MiB each); pass --force");
}

TEST(ActorCapacityTest, MemoryCapsActorsBeyondTheRunningOnesKeepingAFifthFree) {
  // 1 GiB free, a fifth kept: 819 MiB for 200 MiB actors is 4 more than the 3 running.
  const ActorRoom room = actor_room({.cores = 64, .available_bytes = kGiB}, 3, 200 * kMiB);
  EXPECT_EQ(room.by_memory, 7);
  EXPECT_EQ(room.cap(), 7);
  EXPECT_NE(refusal(8, room).find("at most 7 actors"), std::string::npos);
  const ActorRoom full = actor_room({.cores = 64, .available_bytes = 0}, 0, 200 * kMiB);
  EXPECT_EQ(full.cap(), 0);
}

TEST(ActorCapacityTest, ThisMachineIsMeasured) {
  const MachineRoom room = measure_machine_room();
  EXPECT_GE(room.cores, 1);
  EXPECT_GT(room.available_bytes, 0u);
  EXPECT_GT(private_memory_bytes(getpid()), 0u) << "RssAnon of this test";
  EXPECT_EQ(private_memory_bytes(-5), 0u);
}

// A pod's limits.cpu reaches the learner as its cgroup's cpu.max: "auto"
// counts those cores, not the host's.
TEST(ActorCapacityTest, CgroupCpuQuotaIsCountedInWholeCores) {
  EXPECT_EQ(cpu_max_cores("400000 100000"), 4);
  EXPECT_EQ(cpu_max_cores("150000 100000"), 2) << "1.5 CPUs round up";
  EXPECT_EQ(cpu_max_cores("50000 100000"), 1);
  EXPECT_EQ(cpu_max_cores("max 100000"), 0) << "no quota";
  EXPECT_EQ(cpu_max_cores(""), 0);
  EXPECT_EQ(cpu_max_cores("100000 0"), 0);
}

TEST(ActorCapacityTest, CountOverTheCapIsRefusedUnlessOversubscribed) {
  ActorConfig c;
  c.count = 1000;  // more than 2 per core on any machine with under 500 cores
  try {
    initial_actor_count(c);
    ADD_FAILURE() << "expected a refusal";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("actor.count = 1000: this node holds at most "), std::string::npos) << m;
    EXPECT_NE(m.find("set actor.oversubscribe = true"), std::string::npos) << m;
  }
  c.oversubscribe = true;
  EXPECT_EQ(initial_actor_count(c), 1000);
  c.count = 0;
  EXPECT_EQ(initial_actor_count(c), 0) << "0: no local actors";
  c.count.reset();  // "auto"
  const int cores = measure_machine_room().cores;
  EXPECT_EQ(initial_actor_count(c), std::max(1, cores - 1));
}

}  // namespace
}  // namespace pronghorn::fleet
