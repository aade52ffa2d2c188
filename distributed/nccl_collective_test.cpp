// NcclCollective on the CPU, through a fake NcclApi that completes, stalls or
// fails on cue (distributed/testing/fake_nccl_api.h) and an in-memory store:
// the unique-id exchange, every deadline, every abort. The fake's "device
// memory" is host memory, which it never touches. Where the build has CUDA,
// also the real NcclApi's refusal on a machine without a GPU.
#include "distributed/nccl_collective.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/testing/error_of.h"
#include "distributed/testing/fake_nccl_api.h"
#include "distributed/testing/in_memory_store.h"

namespace pronghorn::distributed {
namespace {

using namespace std::chrono_literals;
using pronghorn::testing::error_of;
using testing::FakeNccl;
using testing::FakeNcclApi;
using testing::InMemoryStore;
using Clock = std::chrono::steady_clock;

// Room past a deadline for the last poll and a loaded machine.
constexpr auto kSlack = 1s;

std::shared_ptr<FakeNccl> make_fake() {
  auto fake = std::make_shared<FakeNccl>();
  for (std::size_t i = 0; i < fake->id_to_make.size(); ++i) {
    fake->id_to_make[i] = static_cast<std::byte>(i * 7 + 3);
  }
  return fake;
}

std::unique_ptr<NcclCollective> make_collective(const std::shared_ptr<FakeNccl>& fake,
                                                KeyValueStore& store,
                                                std::chrono::milliseconds timeout, int rank = 0,
                                                int world_size = 1) {
  return std::make_unique<NcclCollective>(std::make_unique<FakeNcclApi>(fake), rank, world_size,
                                          store, timeout);
}

// The message `f` throws as PeerLost and how long it took to throw it.
struct Thrown {
  std::string message;
  Clock::duration elapsed;
};
Thrown peer_lost_of(const std::function<void()>& f) {
  const Clock::time_point start = Clock::now();
  std::string message = error_of<PeerLost>(f);
  return {message, Clock::now() - start};
}

TEST(NcclCollectiveTest, UniqueIdTravelsFromRankZeroThroughTheStore) {
  InMemoryStore store;
  auto fake0 = make_fake(), fake1 = make_fake();
  fake1->id_to_make = {};  // rank 1 must not make its own
  fake0->init_polls = fake1->init_polls = 3;
  // Rank 1 starts first and waits in the store's get for rank 0's id.
  std::unique_ptr<NcclCollective> rank1;
  std::string rank1_error;
  std::thread rank1_thread(
      [&] { rank1_error = error_of([&] { rank1 = make_collective(fake1, store, 2s, 1, 2); }); });
  auto rank0 = make_collective(fake0, store, 2s, 0, 2);
  rank1_thread.join();
  ASSERT_EQ(rank1_error, "");
  ASSERT_TRUE(fake0->id_given && fake1->id_given);
  EXPECT_EQ(*fake0->id_given, fake0->id_to_make);
  EXPECT_EQ(*fake1->id_given, fake0->id_to_make);
  const std::string stored = store.get(kNcclUniqueIdKey, 0ms);
  ASSERT_EQ(stored.size(), kNcclUniqueIdBytes);
  EXPECT_EQ(std::memcmp(stored.data(), fake0->id_to_make.data(), stored.size()), 0);
  EXPECT_EQ(fake0->rank_given, 0);
  EXPECT_EQ(fake1->rank_given, 1);
  EXPECT_EQ(fake1->world_given, 2);
  EXPECT_EQ(rank1->rank(), 1);
  EXPECT_EQ(rank1->world_size(), 2);
  EXPECT_EQ(rank1->backend(), "nccl");
}

TEST(NcclCollectiveTest, StoreGetThatTimesOutNamesTheKey) {
  InMemoryStore store;  // rank 0 never comes
  auto fake = make_fake();
  Thrown thrown = peer_lost_of([&] { make_collective(fake, store, 150ms, 1, 2); });
  EXPECT_NE(thrown.message.find("NCCL rank 1 of 2"), std::string::npos) << thrown.message;
  EXPECT_NE(thrown.message.find("\"nccl/unique_id\""), std::string::npos) << thrown.message;
  EXPECT_GE(thrown.elapsed, 150ms);
  EXPECT_LT(thrown.elapsed, 150ms + kSlack);
  EXPECT_EQ(fake->inits, 0);
  EXPECT_EQ(fake->frees, fake->allocations);
}

TEST(NcclCollectiveTest, MalformedUniqueIdIsAnErrorNamingItsSize) {
  InMemoryStore store;
  store.set(kNcclUniqueIdKey, "short");
  auto fake = make_fake();
  std::string message = error_of([&] { make_collective(fake, store, 100ms, 1, 2); });
  EXPECT_NE(message.find("holds 5 bytes"), std::string::npos) << message;
  EXPECT_EQ(fake->inits, 0);
}

TEST(NcclCollectiveTest, InitThatNeverCompletesIsAbortedAtTheDeadline) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->init_polls = FakeNccl::kNever;
  Thrown thrown = peer_lost_of([&] { make_collective(fake, store, 200ms); });
  EXPECT_NE(thrown.message.find("communicator init did not complete within 0.2 s"),
            std::string::npos)
      << thrown.message;
  EXPECT_GE(thrown.elapsed, 200ms);
  EXPECT_LT(thrown.elapsed, 200ms + kSlack);
  EXPECT_EQ(fake->aborts, 1);
  EXPECT_EQ(fake->destroys, 0);
  EXPECT_EQ(fake->calls_after_abort, 0);
  EXPECT_EQ(fake->frees, fake->allocations);
}

TEST(NcclCollectiveTest, InitErrorIsAbortedAndNamedAtOnce) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->init_error = "unhandled system error (ncclSystemError): bootstrap connect failed";
  Thrown thrown = peer_lost_of([&] { make_collective(fake, store, 5s); });
  EXPECT_NE(thrown.message.find("communicator init failed: unhandled system error"),
            std::string::npos)
      << thrown.message;
  EXPECT_LT(thrown.elapsed, kSlack);
  EXPECT_EQ(fake->aborts, 1);
}

TEST(NcclCollectiveTest, CompletedCallsReturnAndEndInOrder) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->init_polls = 2;
  fake->op_polls = 3;
  auto collective = make_collective(fake, store, 2s, 0, 2);
  std::vector<float> floats(10);
  std::vector<int64_t> ints(4);
  std::vector<std::byte> bytes(7);
  collective->all_reduce_sum(std::span<float>(floats));
  EXPECT_EQ(fake->last_op, "all_reduce_float 10");
  collective->all_reduce_sum(std::span<int64_t>(ints));
  EXPECT_EQ(fake->last_op, "all_reduce_int64 4");
  collective->broadcast(bytes, 1);
  EXPECT_EQ(fake->last_op, "broadcast 7 root 1");
  collective->barrier();
  EXPECT_EQ(fake->last_op, "all_reduce_int64 1");
  EXPECT_EQ(fake->launches, 4);
  EXPECT_EQ(fake->stream_polls, 4 * 4);  // each op: 3 pending, then done
  EXPECT_NE(error_of([&] { collective->broadcast(bytes, 2); }).find("not in a world of 2"),
            std::string::npos);
  collective.reset();
  EXPECT_EQ(fake->finalizes, 1);
  EXPECT_EQ(fake->destroys, 1);
  EXPECT_EQ(fake->aborts, 0);
  EXPECT_EQ(fake->calls_after_abort, 0);
  EXPECT_EQ(fake->frees, fake->allocations);
}

TEST(NcclCollectiveTest, StalledCallIsAbortedOnceAtTheDeadlineWithoutSpinning) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->op_polls = FakeNccl::kNever;
  auto collective = make_collective(fake, store, 300ms);
  std::vector<float> floats(10);
  Thrown thrown = peer_lost_of([&] { collective->all_reduce_sum(std::span<float>(floats)); });
  EXPECT_NE(thrown.message.find("NCCL rank 0 of 1: all-reduce of 10 floats did not complete "
                                "within 0.3 s: a peer stalled or its link is down"),
            std::string::npos)
      << thrown.message;
  EXPECT_GE(thrown.elapsed, 300ms);
  EXPECT_LT(thrown.elapsed, 300ms + kSlack);
  EXPECT_EQ(fake->aborts, 1);
  // Sleeping 100 µs to 1 ms between polls: a few hundred polls in 300 ms,
  // where a spin would make hundreds of thousands.
  EXPECT_GT(fake->stream_polls, 10);
  EXPECT_LT(fake->stream_polls, 3000);
  // The next call fails at once, naming the first cause; nothing more is
  // asked of the aborted communicator, not even by the destructor.
  Thrown again = peer_lost_of([&] { collective->barrier(); });
  EXPECT_NE(again.message.find("aborted earlier (NCCL rank 0 of 1: all-reduce of 10 floats"),
            std::string::npos)
      << again.message;
  EXPECT_LT(again.elapsed, 50ms);
  collective.reset();
  EXPECT_EQ(fake->aborts, 1);
  EXPECT_EQ(fake->destroys, 0);
  EXPECT_EQ(fake->calls_after_abort, 0);
}

TEST(NcclCollectiveTest, AsyncErrorIsAbortedAndNamedAtOnce) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->op_polls = FakeNccl::kNever;
  fake->async_error = "remote process exited or there was a network error (ncclRemoteError)";
  fake->async_error_after_polls = 5;
  auto collective = make_collective(fake, store, 5s);
  std::vector<std::byte> bytes(3);
  Thrown thrown = peer_lost_of([&] { collective->broadcast(bytes, 0); });
  EXPECT_NE(thrown.message.find("broadcast of 3 bytes from rank 0 failed: remote process exited"),
            std::string::npos)
      << thrown.message;
  EXPECT_LT(thrown.elapsed, kSlack);
  EXPECT_EQ(fake->aborts, 1);
}

// As with Gloo, the line names the rank that was lost (Rendezvous::lost_peers).
TEST(NcclCollectiveTest, AFailureNamesTheLostRank) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->op_polls = FakeNccl::kNever;
  fake->async_error = "remote process exited (ncclRemoteError)";
  fake->async_error_after_polls = 1;
  NcclCollective collective(std::make_unique<FakeNcclApi>(fake), 0, 1, store, 5s,
                            [] { return std::string("rank 3"); });
  std::vector<float> data(2);
  Thrown thrown = peer_lost_of([&] { collective.all_reduce_sum(std::span<float>(data)); });
  EXPECT_NE(thrown.message.find("failed: remote process exited (ncclRemoteError); lost: rank 3"),
            std::string::npos)
      << thrown.message;
}

TEST(NcclCollectiveTest, LaunchErrorIsAbortedAndNamedAtOnce) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->launch_error = "invalid usage (ncclInvalidUsage)";
  auto collective = make_collective(fake, store, 5s);
  std::vector<int64_t> ints(2);
  Thrown thrown = peer_lost_of([&] { collective->all_reduce_sum(std::span<int64_t>(ints)); });
  EXPECT_NE(thrown.message.find("all-reduce of 2 int64s failed: invalid usage"), std::string::npos)
      << thrown.message;
  EXPECT_LT(thrown.elapsed, kSlack);
  EXPECT_EQ(fake->aborts, 1);
}

TEST(NcclCollectiveTest, AbortIsIdempotentAndEveryLaterCallThrowsAtOnce) {
  InMemoryStore store;
  auto fake = make_fake();
  auto collective = make_collective(fake, store, 5s);
  collective->abort();
  collective->abort();
  EXPECT_EQ(fake->aborts, 1);
  std::vector<float> floats(3);
  std::vector<int64_t> ints(3);
  std::vector<std::byte> bytes(3);
  const std::vector<std::function<void()>> calls = {
      [&] { collective->all_reduce_sum(std::span<float>(floats)); },
      [&] { collective->all_reduce_sum(std::span<int64_t>(ints)); },
      [&] { collective->broadcast(bytes, 0); }, [&] { collective->barrier(); }};
  for (const auto& call : calls) {
    Thrown thrown = peer_lost_of(call);
    EXPECT_NE(thrown.message.find("aborted earlier (abort() was called)"), std::string::npos)
        << thrown.message;
    EXPECT_LT(thrown.elapsed, 50ms);
  }
  EXPECT_EQ(fake->launches, 0);
  collective.reset();
  EXPECT_EQ(fake->aborts, 1);
  EXPECT_EQ(fake->destroys, 0);
  EXPECT_EQ(fake->calls_after_abort, 0);
}

TEST(NcclCollectiveTest, AbortFromAnotherThreadEndsAPendingCall) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->op_polls = FakeNccl::kNever;
  auto collective = make_collective(fake, store, 10s);
  std::thread watchdog([&] {
    // Abort once the call is under way (a poll with a deadline, not a sleep).
    const Clock::time_point give_up = Clock::now() + 5s;
    while (fake->stream_polls == 0 && Clock::now() < give_up) std::this_thread::yield();
    collective->abort();
  });
  std::vector<float> floats(4);
  Thrown thrown = peer_lost_of([&] { collective->all_reduce_sum(std::span<float>(floats)); });
  watchdog.join();
  EXPECT_NE(thrown.message.find("abort() was called"), std::string::npos) << thrown.message;
  EXPECT_LT(thrown.elapsed, 5s);
  EXPECT_EQ(fake->aborts, 1);
  EXPECT_EQ(fake->calls_after_abort, 0);
}

TEST(NcclCollectiveTest, DestructorAbortsWhenFinalizeStalls) {
  InMemoryStore store;
  auto fake = make_fake();
  fake->finalize_stalls = true;
  auto collective = make_collective(fake, store, 150ms);
  const Clock::time_point start = Clock::now();
  collective.reset();
  EXPECT_LT(Clock::now() - start, 150ms + kSlack);
  EXPECT_EQ(fake->finalizes, 1);
  EXPECT_EQ(fake->aborts, 1);
  EXPECT_EQ(fake->destroys, 0);
}

TEST(NcclCollectiveTest, BackendNcclIsAClearUsageErrorWithoutAGpu) {
  InMemoryStore store;
#ifdef PRONGHORN_WITH_CUDA
  // The real NcclApi: CUDA's own reason, on a machine with no usable device.
  std::string message;
  try {
    auto api = make_cuda_nccl_api();
    GTEST_SKIP() << "a CUDA device exists here";
  } catch (const UsageError& e) {
    message = e.what();
  }
  EXPECT_EQ(message.rfind("distributed.backend = \"nccl\": no CUDA device (", 0), 0) << message;
  EXPECT_NE(message.find("); use \"gloo\" or \"auto\""), std::string::npos) << message;
  EXPECT_EQ(error_of<UsageError>([&] { make_nccl_collective(0, 1, store, 100ms); }), message);
#else
  std::string message = error_of<UsageError>([&] { make_nccl_collective(0, 1, store, 100ms); });
  EXPECT_NE(message.find("distributed.backend = \"nccl\": this build has no CUDA"),
            std::string::npos)
      << message;
#endif
}

}  // namespace
}  // namespace pronghorn::distributed
