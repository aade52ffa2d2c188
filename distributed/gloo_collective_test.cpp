#include "distributed/gloo_collective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <future>
#include <vector>

#include "distributed/testing/two_ranks.h"

namespace pronghorn::distributed {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Two ranks as threads: their rendezvous, then a GlooCollective each.
struct TwoRanks {
  std::unique_ptr<Rendezvous> r0, r1;
  std::unique_ptr<GlooCollective> c0, c1;

  explicit TwoRanks(std::chrono::milliseconds timeout) {
    std::future<std::unique_ptr<Rendezvous>> rank0;
    const int port = testing::start_rank0(testing::rank_options(0, 2, 0), rank0);
    r1 = std::make_unique<Rendezvous>(testing::rank_options(1, 2, port));
    r0 = rank0.get();
    auto make = [timeout](Rendezvous& r) {
      return std::make_unique<GlooCollective>(
          r.prefixed("gloo"), GlooOptions{.rank = r.rank(),
                                          .world_size = 2,
                                          .bind_address = "127.0.0.1",
                                          .timeout = timeout,
                                          .lost_peers = [&r] { return r.lost_peers(); }});
    };
    auto made0 = std::async(std::launch::async, [&] { return make(*r0); });
    c1 = make(*r1);
    c0 = made0.get();
  }
};

TEST(GlooCollectiveTest, AllReduceSumsAndBroadcastCopiesRootsBytes) {
  TwoRanks ranks(10s);
  std::vector<float> a = {1.5f, -2.0f, 3.0f}, b = {0.5f, 4.0f, -3.0f};
  std::vector<int64_t> i0 = {1, 1LL << 40}, i1 = {2, 5};
  std::vector<std::byte> m0(5, std::byte{7}), m1(5, std::byte{0});
  // Past 256 kB an all-reduce takes c10d's path, below it Gloo's own.
  std::vector<float> big0(100'000), big1(100'000);
  for (size_t i = 0; i < big0.size(); ++i) {
    big0[i] = static_cast<float>(i);
    big1[i] = 0.5f;
  }
  auto other = std::async(std::launch::async, [&] {
    ranks.c1->all_reduce_sum(std::span<float>(big1));
    ranks.c1->all_reduce_sum(std::span<float>(b));
    ranks.c1->all_reduce_sum(std::span<int64_t>(i1));
    ranks.c1->broadcast(m1, 0);
    ranks.c1->barrier();
  });
  ranks.c0->all_reduce_sum(std::span<float>(big0));
  ranks.c0->all_reduce_sum(std::span<float>(a));
  ranks.c0->all_reduce_sum(std::span<int64_t>(i0));
  ranks.c0->broadcast(m0, 0);
  ranks.c0->barrier();
  other.get();
  EXPECT_EQ(a, (std::vector<float>{2.0f, 2.0f, 0.0f}));
  EXPECT_EQ(b, a);
  EXPECT_EQ(i0, (std::vector<int64_t>{3, (1LL << 40) + 5}));
  EXPECT_EQ(i1, i0);
  EXPECT_EQ(m1, m0);
  EXPECT_EQ(big1, big0);
  EXPECT_EQ(big0[0], 0.5f);
  EXPECT_EQ(big0[99'999], 99'999.5f);
}

// N ranks as threads: every rank sums the same buffers at once; the sums
// of floats of mixed magnitudes depend on their order, so a rank that
// summed in an order of its own would get other bits. Sizes on both of
// Gloo's own paths (halving and doubling up to 64 kB, the chunked ring
// above), at 3, 5 and 6 ranks (not powers of two: blocks of several
// sizes) and 4; and an int64 vote of fewer elements than ranks.
TEST(GlooCollectiveTest, EveryRankGetsTheSameBitsAtThreeToSixRanks) {
  const auto value = [](size_t i, int r) {
    return std::ldexp(1.0f + 0.1f * static_cast<float>((i * 7 + r * 3) % 10),
                      static_cast<int>((i + 5 * r) % 30) - 15);
  };
  for (const int world : {3, 4, 5, 6}) {
    std::future<std::unique_ptr<Rendezvous>> rank0;
    const int port = testing::start_rank0(testing::rank_options(0, world, 0), rank0);
    ASSERT_GT(port, 0);
    std::vector<std::future<std::unique_ptr<Rendezvous>>> joining;
    for (int r = 1; r < world; ++r) {
      joining.push_back(std::async(std::launch::async, [=] {
        return std::make_unique<Rendezvous>(testing::rank_options(r, world, port));
      }));
    }
    std::vector<std::unique_ptr<Rendezvous>> rendezvous;
    rendezvous.push_back(rank0.get());
    for (auto& j : joining) rendezvous.push_back(j.get());
    const std::vector<size_t> counts = {7, 5'000, 40'000};  // 28 B, 20 kB, 160 kB
    // sums[r][c]: rank r's result for counts[c]; rank r adds values of its own.
    std::vector<std::vector<std::vector<float>>> sums(world);
    std::vector<std::vector<int64_t>> votes(world);
    std::vector<std::future<void>> running;
    for (int r = 0; r < world; ++r) {
      running.push_back(std::async(std::launch::async, [&, r] {
        Rendezvous& rv = *rendezvous[r];
        GlooCollective c(rv.prefixed("gloo"),
                         GlooOptions{.rank = r,
                                     .world_size = world,
                                     .bind_address = "127.0.0.1",
                                     .timeout = 20s,
                                     .lost_peers = [&rv] { return rv.lost_peers(); }});
        for (const size_t count : counts) {
          std::vector<float> v(count);
          for (size_t i = 0; i < count; ++i) v[i] = value(i, r);
          c.all_reduce_sum(std::span<float>(v));
          sums[r].push_back(std::move(v));
        }
        votes[r] = {1, int64_t{r} << 33};
        c.all_reduce_sum(std::span<int64_t>(votes[r]));
        c.barrier();
      }));
    }
    for (auto& f : running) f.get();
    for (size_t c = 0; c < counts.size(); ++c) {
      for (size_t i = 0; i < counts[c]; ++i) {
        double exact = 0;
        for (int r = 0; r < world; ++r) exact += value(i, r);
        ASSERT_NEAR(sums[0][c][i], exact, 1e-6 * std::abs(exact)) << world << " ranks, " << i;
      }
      for (int r = 1; r < world; ++r) {
        ASSERT_EQ(std::memcmp(sums[r][c].data(), sums[0][c].data(), counts[c] * sizeof(float)), 0)
            << world << " ranks, " << counts[c] << " floats: rank " << r << " differs from rank 0";
      }
    }
    const int64_t rank_sum = int64_t{world} * (world - 1) / 2;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(votes[r], (std::vector<int64_t>{world, rank_sum << 33})) << world << " ranks";
    }
  }
}

TEST(GlooCollectiveTest, APeerThatNeverCallsIsADeadlineNamingItNotAHang) {
  TwoRanks ranks(1s);
  std::vector<float> a = {1.0f};
  const auto start = Clock::now();
  std::string error;
  try {
    ranks.c0->all_reduce_sum(std::span<float>(a));
  } catch (const PeerLost& e) {
    error = e.what();
  }
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 8s);  // the deadline, and naming the lost rank (2.5 s)
  EXPECT_NE(error.find("rank 0: lost a peer: all-reduce failed: "), std::string::npos) << error;
  EXPECT_NE(error.find("(deadline 1 s, distributed.timeout_s)"), std::string::npos) << error;
  // Unusable after a failure: the next call fails at once.
  const auto again = Clock::now();
  EXPECT_THROW(ranks.c0->barrier(), PeerLost);
  EXPECT_LT(Clock::now() - again, 100ms);
  ranks.c1->abort();  // its pending state with rank 0 is gone too
}

}  // namespace
}  // namespace pronghorn::distributed
