#include "distributed/rendezvous.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/testing/error_of.h"
#include "distributed/collective.h"
#include "distributed/testing/two_ranks.h"

namespace pronghorn::distributed {
namespace {

using namespace std::chrono_literals;
using testing::rank_options;
using testing::start_rank0;
using Clock = std::chrono::steady_clock;
using pronghorn::testing::error_of;

TEST(RendezvousTest, TwoRanksWithOneTokenMeetAndAgree) {
  std::future<std::unique_ptr<Rendezvous>> rank0;
  const int port = start_rank0(rank_options(0, 2, 0), rank0);
  ASSERT_GT(port, 0);
  Rendezvous rank1(rank_options(1, 2, port));
  std::unique_ptr<Rendezvous> r0 = rank0.get();
  EXPECT_EQ(r0->incarnation(), rank1.incarnation());
  const Facts facts = {{"model.hidden", "[64, 64]"}, {"unroll spec", "abc"}};
  auto agreed0 = std::async(std::launch::async, [&] { r0->agree(facts); });
  rank1.agree(facts);
  agreed0.get();
  rank1.publish("node", "n2");
  EXPECT_EQ(r0->read(1, "node"), "n2");
}

TEST(RendezvousTest, AConfigDifferenceStopsBothRanksNamingTheKey) {
  std::future<std::unique_ptr<Rendezvous>> rank0;
  const int port = start_rank0(rank_options(0, 2, 0), rank0);
  Rendezvous rank1(rank_options(1, 2, port));
  std::unique_ptr<Rendezvous> r0 = rank0.get();
  auto agreed0 = std::async(std::launch::async, [&] {
    return error_of([&] { r0->agree({{"env.name", "cartpole"}, {"model.hidden", "[64, 64]"}}); });
  });
  const std::string error1 = error_of([&] {
    rank1.agree({{"env.name", "cartpole"}, {"model.hidden", "[32]"}});
  });
  const std::string error0 = agreed0.get();
  EXPECT_EQ(error1, "rank 1: model.hidden differs (rank 0: [64, 64]; rank 1: [32])");
  EXPECT_EQ(error0, error1);
}

TEST(RendezvousTest, AWrongTokenIsRefusedOnBothSides) {
  std::future<std::unique_ptr<Rendezvous>> rank0;
  const int port = start_rank0(rank_options(0, 2, 0), rank0);
  bool usage1 = false;
  const std::string error1 = error_of([&] {
    try {
      Rendezvous rank1(rank_options(1, 2, port, "not-the-token"));
    } catch (const UsageError&) {
      usage1 = true;
      throw;
    }
  });
  EXPECT_TRUE(usage1) << error1;
  EXPECT_NE(error1.find("rank 1: its token differs from rank 0's"), std::string::npos) << error1;
  EXPECT_THROW(rank0.get(), UsageError);
}

TEST(RendezvousTest, ARankClaimedTwiceIsRefused) {
  std::future<std::unique_ptr<Rendezvous>> rank0;
  const int port = start_rank0(rank_options(0, 3, 0), rank0);
  // Two processes say they are rank 1: whichever claims first is in, the
  // other is refused at once.
  auto claim = [port] {
    return std::async(std::launch::async, [port]() -> std::string {
      try {
        Rendezvous r(rank_options(1, 3, port));
        return "joined";
      } catch (const UsageError& e) {
        return e.what();
      }
    });
  };
  auto a = claim();
  auto b = claim();
  Rendezvous rank2(rank_options(2, 3, port));
  const std::unique_ptr<Rendezvous> r0 = rank0.get();  // its store lives until both are done
  std::vector<std::string> outcomes = {a.get(), b.get()};
  std::sort(outcomes.begin(), outcomes.end());
  EXPECT_EQ(outcomes[0], "joined");
  EXPECT_NE(outcomes[1].find("rank 1 of run test-run is already taken"), std::string::npos)
      << outcomes[1];
}

TEST(RendezvousTest, NoRankZeroIsATimeoutNamingItNotAHang) {
  const auto start = Clock::now();
  bool lost = false;
  const std::string error = error_of([&] {
    try {
      // A port nothing listens on: the one a finished rank 0 had.
      std::future<std::unique_ptr<Rendezvous>> rank0;
      int port = 0;
      {
        auto o = rank_options(0, 1, 0);
        o.on_listening = [&](int p) { port = p; };
        Rendezvous alone(o);
      }
      Rendezvous rank1(rank_options(1, 2, port, "t0k3n", 1s));
    } catch (const PeerLost&) {
      lost = true;
      throw;
    }
  });
  EXPECT_TRUE(lost) << error;
  EXPECT_LT(Clock::now() - start, 8s);
  EXPECT_NE(error.find("rank 1: rank 0's store at 127.0.0.1:"), std::string::npos) << error;
}

TEST(RendezvousTest, ARankThatNeverComesEndsRankZeroAfterTheRendezvousTimeout) {
  const auto start = Clock::now();
  const std::string error = error_of([] { Rendezvous r0(rank_options(0, 2, 0, "t0k3n", 1s)); });
  EXPECT_NE(error.find("rank 1 did not join within 1 s"), std::string::npos) << error;
  EXPECT_LT(Clock::now() - start, 5s);
}

TEST(RendezvousTest, ARankWhoseHeartbeatStoppedIsNamedLost) {
  std::future<std::unique_ptr<Rendezvous>> rank0;
  const int port = start_rank0(rank_options(0, 2, 0), rank0);
  auto rank1 = std::make_unique<Rendezvous>(rank_options(1, 2, port));
  std::unique_ptr<Rendezvous> r0 = rank0.get();
  EXPECT_EQ(r0->lost_peers(), "a peer");  // both beat
  rank1.reset();
  EXPECT_EQ(r0->lost_peers(), "rank 1");
}

}  // namespace
}  // namespace pronghorn::distributed
