#include "buffer/ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "buffer/process.h"
#include "buffer/testing/names.h"
#include "buffer/testing/pattern.h"
#include "buffer/testing/spawn.h"
#include "core/error.h"

namespace pronghorn::buffer {
namespace {

using namespace std::chrono_literals;

// Takes everything the producers commit until `expected` unrolls arrived or
// `done()` says no more will; checks each unroll byte for byte and counts.
struct Received {
  std::map<uint64_t, std::set<uint64_t>> seqs;  // actor → seqs seen
  uint64_t total = 0, torn = 0, duplicates = 0;
};
void drain(Ring& ring, uint32_t batch, Received& got, const std::function<bool()>& done) {
  const size_t bytes = ring.layout().bytes;
  for (;;) {
    auto taken = ring.take(batch, 0, UINT64_MAX / 2, 50ms);
    if (!taken) {
      if (!done()) continue;
      // Producers are finished: collect the remainder one by one.
      taken = ring.take(1, 0, UINT64_MAX / 2, 0ms);
      if (!taken) return;
    }
    for (const TakenSlot& t : *taken) {
      uint64_t actor, seq;
      if (!testing::intact(t.data, bytes, &actor, &seq)) ++got.torn;
      if (!got.seqs[actor].insert(seq).second) ++got.duplicates;
      ++got.total;
      EXPECT_EQ(t.stamp.actor, actor);
      EXPECT_EQ(t.stamp.policy_version, seq);
    }
    ring.release(*taken);
  }
}

TEST(UnrollSpecTest, LayoutIsAlignedOrderedAndSizedFromTheSpec) {
  UnrollSpec spec{/*T=*/32,         /*K=*/256,         {4},
                  Dtype::kFloat32,  /*action_dims=*/0, /*logits=*/2,
                  /*core_hidden=*/8};
  SlotLayout l = slot_layout(spec);
  const Field fields[] = {l.obs,
                          l.actions,
                          l.rewards,
                          l.terminated,
                          l.truncated,
                          l.behaviour_log_probs,
                          l.final_values,
                          l.logits,
                          l.core_state,
                          l.episode_returns,
                          l.episode_lengths};
  size_t end = 0;
  for (const Field& f : fields) {
    EXPECT_EQ(f.offset % 64, 0u);
    EXPECT_GE(f.offset, end) << "fields do not overlap";
    end = f.offset + f.bytes;
  }
  EXPECT_LE(end, l.bytes);
  EXPECT_EQ(l.bytes % 64, 0u);
  EXPECT_EQ(l.obs.bytes, 33u * 256 * 4 * 4);
  EXPECT_EQ(l.actions.bytes, 32u * 256 * 4);
  EXPECT_EQ(l.terminated.bytes, 32u * 256);
  EXPECT_EQ(l.logits.bytes, 32u * 256 * 2 * 4);
  EXPECT_EQ(l.core_state.bytes, 2u * 256 * 8 * 4) << "h and c, [K, H] float32 each";
  UnrollSpec feed_forward = spec;
  feed_forward.core_hidden = 0;
  EXPECT_EQ(slot_layout(feed_forward).core_state.bytes, 0u);
  UnrollSpec pixels{20, 32, {1, 84, 84}, Dtype::kUInt8, 0, 0};
  EXPECT_EQ(slot_layout(pixels).obs.bytes, 21u * 32 * 84 * 84);
  UnrollSpec continuous = spec;
  continuous.action_dims = 3;
  EXPECT_EQ(slot_layout(continuous).actions.bytes, 32u * 256 * 3 * 4);
}

TEST(UnrollSpecTest, HashTellsSpecsApart) {
  UnrollSpec a = testing::test_spec(), b = a;
  EXPECT_EQ(spec_hash(a), spec_hash(b));
  b.K = 9;
  EXPECT_NE(spec_hash(a), spec_hash(b));
  b = a;
  b.obs_dtype = Dtype::kUInt8;
  EXPECT_NE(spec_hash(a), spec_hash(b));
  b = a;
  b.obs_shape = {3, 1};
  EXPECT_NE(spec_hash(a), spec_hash(b));
  b = a;
  b.core_hidden = 16;  // an actor without the learner's core must not attach
  EXPECT_NE(spec_hash(a), spec_hash(b));
}

TEST(RingTest, FieldsWrittenThroughTheLayoutReadBackThroughAnAttachedRing) {
  // The writer and the reader each compute the layout from the spec; every
  // field written by one is read back, value for value, by the other.
  const std::string name = testing::unique_name("roundtrip");
  UnrollSpec spec{3, 2, {2}, Dtype::kFloat32, /*action_dims=*/0, /*logits=*/2, /*core_hidden=*/3};
  auto reader = Ring::create(name, spec, 2);
  auto writer = Ring::attach(name, spec);
  const SlotLayout& l = writer->layout();
  auto slot = writer->claim(0ms);
  ASSERT_TRUE(slot);
  uint8_t* base = writer->slot_data(*slot);
  auto fill_field = [&](const Field& f, float start) {
    for (size_t k = 0; k < f.bytes / 4; ++k) {
      float v = start + static_cast<float>(k);
      std::memcpy(base + f.offset + 4 * k, &v, 4);
    }
  };
  const Field* fields[] = {
      &l.obs,    &l.actions,    &l.rewards,         &l.behaviour_log_probs, &l.final_values,
      &l.logits, &l.core_state, &l.episode_returns, &l.episode_lengths};
  for (size_t f = 0; f < std::size(fields); ++f) fill_field(*fields[f], 1000.0f * (f + 1));
  std::memset(base + l.terminated.offset, 1, l.terminated.bytes);
  std::memset(base + l.truncated.offset, 2, l.truncated.bytes);
  writer->commit(*slot, {5, 1, 9, 11, 12, 13, 0});
  auto taken = reader->take(1, 5, 0, 0ms);
  ASSERT_TRUE(taken);
  const TakenSlot& t = (*taken)[0];
  EXPECT_EQ(t.stamp.policy_version, 5u);
  EXPECT_EQ(t.stamp.episodes, 1u);
  EXPECT_EQ(t.stamp.actor, 9u);
  EXPECT_EQ(t.stamp.env_us, 11u);
  EXPECT_EQ(t.stamp.policy_us, 12u);
  EXPECT_EQ(t.stamp.wait_us, 13u);
  const SlotLayout& r = reader->layout();
  EXPECT_EQ(r.obs.bytes, 4u * 2 * 2 * 4) << "[T+1, K, 2] float32";
  const Field* read_fields[] = {
      &r.obs,    &r.actions,    &r.rewards,         &r.behaviour_log_probs, &r.final_values,
      &r.logits, &r.core_state, &r.episode_returns, &r.episode_lengths};
  for (size_t f = 0; f < std::size(read_fields); ++f) {
    for (size_t k = 0; k < read_fields[f]->bytes / 4; ++k) {
      float v;
      std::memcpy(&v, t.data + read_fields[f]->offset + 4 * k, 4);
      ASSERT_EQ(v, 1000.0f * (f + 1) + k) << "field " << f << " element " << k;
    }
  }
  EXPECT_EQ(t.data[r.terminated.offset + r.terminated.bytes - 1], 1);
  EXPECT_EQ(t.data[r.truncated.offset], 2);
  reader->release(*taken);
}

TEST(RingTest, CreatesAPrivateSegmentAndRemovesItOnDestruction) {
  const std::string name = testing::unique_name("mode");
  {
    auto ring = Ring::create(name, testing::test_spec(), 4);
    struct stat st {};
    ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  struct stat st {};
  EXPECT_NE(stat(("/dev/shm" + name).c_str(), &st), 0) << "unlinked by its owner";
}

TEST(RingTest, AttachingWithAnotherSpecIsAClearError) {
  const std::string name = testing::unique_name("spec");
  auto ring = Ring::create(name, testing::test_spec(), 4);
  UnrollSpec other = testing::test_spec();
  other.T = 5;
  try {
    Ring::attach(name, other);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("made for another unroll spec"), std::string::npos)
        << e.what();
  }
  try {
    Ring::attach(testing::unique_name("missing"), testing::test_spec());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot attach"), std::string::npos) << e.what();
  }
}

TEST(RingTest, AttachingToSomethingElseIsAClearError) {
  const std::string name = testing::unique_name("junk");
  int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 16), 0);
  close(fd);
  try {
    Ring::attach(name, testing::test_spec());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wrong magic"), std::string::npos) << e.what();
  }
  shm_unlink(name.c_str());
}

TEST(RingTest, CreatingAnExistingNameIsAClearErrorAndLeavesItAlone) {
  const std::string name = testing::unique_name("exists");
  auto first = Ring::create(name, testing::test_spec(), 4);
  auto slot = first->claim(0ms);
  ASSERT_TRUE(slot);
  first->commit(*slot, {});
  try {
    Ring::create(name, testing::test_spec(), 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ring " + name +
                                         ": cannot create: a segment of this name exists already"),
              std::string::npos)
        << e.what();
  }
  auto reader = Ring::attach(name, testing::test_spec());
  EXPECT_EQ(reader->counters().committed, 1u) << "the existing ring is untouched";
  EXPECT_EQ(reader->counters().ready, 1u);
}

TEST(RingTest, ThreadsDeliverEveryUnrollOnceAndWhole) {
  const std::string name = testing::unique_name("threads");
  auto ring = Ring::create(name, testing::test_spec(), 8);
  const uint64_t kPerProducer = 3000, kProducers = 4;
  std::atomic<int> running{static_cast<int>(kProducers)};
  std::vector<std::thread> producers;
  for (uint64_t actor = 0; actor < kProducers; ++actor) {
    producers.emplace_back([&, actor] {
      auto mine = Ring::attach(name, testing::test_spec());
      const size_t bytes = mine->layout().bytes;
      for (uint64_t seq = 0; seq < kPerProducer; ++seq) {
        auto slot = mine->claim(10s);
        ASSERT_TRUE(slot);
        testing::fill(mine->slot_data(*slot), bytes, actor, seq, 0, testing::words(bytes));
        mine->commit(*slot, {.policy_version = seq, .actor = static_cast<uint32_t>(actor)});
      }
      --running;
    });
  }
  Received got;
  drain(*ring, 3, got, [&] { return running == 0; });
  for (auto& t : producers) t.join();
  EXPECT_EQ(got.total, kPerProducer * kProducers);
  EXPECT_EQ(got.torn, 0u);
  EXPECT_EQ(got.duplicates, 0u);
  RingCounters c = ring->counters();
  EXPECT_EQ(c.committed, kPerProducer * kProducers);
  EXPECT_EQ(c.consumed, c.committed);
  EXPECT_EQ(c.ready, 0u);
}

TEST(RingTest, ProcessesDeliverEveryUnrollOnceAndWhole) {
  const std::string name = testing::unique_name("procs");
  auto ring = Ring::create(name, testing::test_spec(), 8);
  const uint64_t kPerProducer = 4000;
  std::vector<pid_t> pids;
  for (int actor = 0; actor < 3; ++actor) {
    pids.push_back(testing::spawn_helper(
        {"produce", name, std::to_string(kPerProducer), std::to_string(actor)}));
    ASSERT_GT(pids.back(), 0);
  }
  Received got;
  drain(*ring, 4, got, [&] { return ring->counters().committed == 3 * kPerProducer; });
  for (pid_t pid : pids) EXPECT_EQ(testing::wait_exit(pid), 0);
  EXPECT_EQ(got.total, 3 * kPerProducer);
  EXPECT_EQ(got.torn, 0u);
  EXPECT_EQ(got.duplicates, 0u);
  for (int actor = 0; actor < 3; ++actor) EXPECT_EQ(got.seqs[actor].size(), kPerProducer);
}

TEST(RingTest, SlotsOfKilledWritersAreReclaimedAndNothingTornArrives) {
  const std::string name = testing::unique_name("kill");
  auto ring = Ring::create(name, testing::test_spec(), 6);
  std::vector<pid_t> pids;
  for (int actor = 0; actor < 6; ++actor) {
    pids.push_back(
        testing::spawn_helper({"produce", name, "1000000", std::to_string(actor), "slow"}));
  }
  std::atomic<bool> all_dead{false};
  std::thread killer([&] {
    std::mt19937 rng(7);
    for (pid_t pid : pids) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 150));
      kill(pid, SIGKILL);
      EXPECT_EQ(testing::wait_exit(pid), 128 + SIGKILL);
    }
    all_dead = true;
  });
  Received got;
  drain(*ring, 2, got, [&] { return all_dead.load(); });
  killer.join();
  ring->reclaim_dead_writers();
  RingCounters c = ring->counters();
  EXPECT_EQ(got.torn, 0u);
  EXPECT_EQ(got.duplicates, 0u);
  EXPECT_EQ(got.total, c.committed) << "every committed unroll arrived";
  EXPECT_EQ(c.consumed, c.committed);
  EXPECT_GT(c.committed, 10u);
  EXPECT_GE(c.reclaimed, 1u) << "killed mid-write, their slots came back";
  // Every slot is FREE again: all of them can be claimed at once.
  for (uint32_t i = 0; i < ring->slots(); ++i) EXPECT_TRUE(ring->claim(0ms)) << i;
}

TEST(RingTest, BlockedConsumerUsesAlmostNoCpu) {
  auto ring = Ring::create(testing::unique_name("idle"), testing::test_spec(), 4);
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ring->take(1, 0, 10, 1000ms));
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  getrusage(RUSAGE_THREAD, &after);
  auto cpu = [](const rusage& r) {
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + 1e-6 * (r.ru_utime.tv_usec + r.ru_stime.tv_usec);
  };
  EXPECT_GE(waited, 0.99);
  EXPECT_LT(cpu(after) - cpu(before), 0.02) << "seconds of CPU while blocked for 1 s";
}

TEST(RingTest, ConsumerWakesWhenAWriterCommits) {
  const std::string name = testing::unique_name("wake");
  auto ring = Ring::create(name, testing::test_spec(), 2);
  std::thread writer([&] {
    std::this_thread::sleep_for(200ms);
    auto mine = Ring::attach(name, testing::test_spec());
    auto slot = mine->claim(1s);
    mine->commit(*slot, {});
  });
  auto start = std::chrono::steady_clock::now();
  auto taken = ring->take(1, 0, 10, 5s);
  auto waited = std::chrono::steady_clock::now() - start;
  writer.join();
  ASSERT_TRUE(taken);
  EXPECT_LT(waited, 1s) << "woken by the commit, not by the timeout";
}

TEST(ProcessTest, AliveMeansSamePidAndSameStartTime) {
  const int self = getpid();
  const uint64_t start = process_start_time(self);
  EXPECT_GT(start, 0u);
  EXPECT_TRUE(process_alive(self, start));
  EXPECT_TRUE(process_alive(self, 0));
  EXPECT_FALSE(process_alive(self, start + 1)) << "a reused pid is another process";
  pid_t child = testing::spawn_helper({"no-such-command"});
  testing::wait_exit(child);
  EXPECT_FALSE(process_alive(child, 0));
}

}  // namespace
}  // namespace pronghorn::buffer
