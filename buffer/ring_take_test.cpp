// What Ring::take and Ring::take_from hand the consumer: the oldest commits
// first, stale unrolls dropped and counted, one actor's unrolls alone; and a
// full ring that times out. (buffer/ring_test.cpp: layout, attaching,
// delivery across threads and processes, dead writers, wake-ups.)
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "buffer/ring.h"
#include "buffer/testing/names.h"
#include "buffer/testing/pattern.h"

namespace pronghorn::buffer {
namespace {

using namespace std::chrono_literals;

TEST(RingTest, StaleUnrollsAreDroppedAndCounted) {
  auto ring = Ring::create(testing::unique_name("lag"), testing::test_spec(), 8);
  for (uint64_t version : {1, 2, 7, 8, 9}) {
    auto slot = ring->claim(0ms);
    ASSERT_TRUE(slot);
    ring->commit(*slot, {.policy_version = version});
  }
  // Learner at version 10 with max lag 3: versions 7, 8, 9 are fresh.
  auto taken = ring->take(3, 10, 3, 0ms);
  ASSERT_TRUE(taken);
  std::vector<uint64_t> versions;
  for (auto& t : *taken) versions.push_back(t.stamp.policy_version);
  EXPECT_EQ(versions, (std::vector<uint64_t>{7, 8, 9})) << "oldest commits first";
  ring->release(*taken);
  RingCounters c = ring->counters();
  EXPECT_EQ(c.dropped_stale, 2u);
  EXPECT_EQ(c.consumed, 3u);
  EXPECT_EQ(c.committed, c.consumed + c.dropped_stale) << "nothing lost, nothing twice";

  // A lag limit above the learner's version drops nothing.
  for (uint64_t version : {0, 1}) {
    auto slot = ring->claim(0ms);
    ASSERT_TRUE(slot);
    ring->commit(*slot, {.policy_version = version});
  }
  taken = ring->take(2, 2, 16, 0ms);
  ASSERT_TRUE(taken);
  ring->release(*taken);
  EXPECT_EQ(ring->counters().dropped_stale, 2u);
}

TEST(RingTest, TakeFromGivesOneActorsOldestUnrolls) {
  auto ring = Ring::create(testing::unique_name("from"), testing::test_spec(), 8);
  // (actor, version) in commit order.
  for (auto [actor, version] :
       std::vector<std::pair<uint32_t, uint64_t>>{{1, 1}, {0, 2}, {1, 3}, {0, 4}, {1, 5}}) {
    auto slot = ring->claim(0ms);
    ASSERT_TRUE(slot);
    ring->commit(*slot, {.policy_version = version, .actor = actor});
  }
  EXPECT_FALSE(ring->take_from(0, 3, 0ms)) << "actor 0 has 2 unrolls, not 3";
  EXPECT_FALSE(ring->take_from(2, 1, 10ms)) << "actor 2 has none";
  auto taken = ring->take_from(1, 2, 0ms);
  ASSERT_TRUE(taken);
  std::vector<uint64_t> versions;
  for (auto& t : *taken) versions.push_back(t.stamp.policy_version);
  EXPECT_EQ(versions, (std::vector<uint64_t>{1, 3})) << "actor 1's, oldest commits first";
  ring->release(*taken);
  taken = ring->take_from(0, 2, 0ms);
  ASSERT_TRUE(taken);
  ring->release(*taken);
  const RingCounters c = ring->counters();
  EXPECT_EQ(c.dropped_stale, 0u);
  EXPECT_EQ(c.consumed, 4u);
  EXPECT_EQ(c.ready, 1u) << "actor 1's newest waits";
}

TEST(RingTest, FullRingTimesOutAndAbandonFreesASlot) {
  auto ring = Ring::create(testing::unique_name("full"), testing::test_spec(), 2);
  auto a = ring->claim(0ms), b = ring->claim(0ms);
  ASSERT_TRUE(a && b);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ring->claim(100ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  ring->abandon(*a);
  EXPECT_TRUE(ring->claim(0ms));
  EXPECT_EQ(ring->counters().abandoned, 1u);
}

}  // namespace
}  // namespace pronghorn::buffer
