// The actor gateway's Join and StreamUnrolls (remote/actor_gateway.h):
// refusals, unrolls into the ring, credits, acks, rejoins, scaling.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "remote/testing/gateway_fixture.h"

namespace pronghorn::remote::testing {
namespace {

using namespace std::chrono_literals;
using grpc::StatusCode;

TEST_F(GatewayTest, JoinRefusesMissingOrWrongTokenOtherVersionAndOtherPlugin) {
  v1::JoinReply reply;
  grpc::Status status = join(reply, "node-a", {}, "");
  EXPECT_EQ(status.error_code(), StatusCode::UNAUTHENTICATED) << status.error_message();
  status = join(reply, "node-a", {}, "not-the-token");
  EXPECT_EQ(status.error_code(), StatusCode::PERMISSION_DENIED) << status.error_message();

  status = join(reply, "node-a", [](v1::JoinRequest& r) { r.set_version("0.0.1"); });
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("0.0.1"), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find(kVersion), std::string::npos) << status.error_message();

  status = join(reply, "node-a", [](v1::JoinRequest& r) {
    *r.mutable_plugin() = job_plugin();
    r.mutable_plugin()->set_sha256(std::string(64, 'b'));
  });
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find(std::string(64, 'a')), std::string::npos)
      << status.error_message();
  EXPECT_NE(status.error_message().find(std::string(64, 'b')), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(gateway_->nodes().empty()) << "a refused node must not be listed";
}

TEST_F(GatewayTest, JoinReplyDescribesTheJob) {
  v1::JoinReply reply;
  const grpc::Status status = join(reply, "node-a", [](v1::JoinRequest& r) {
    *r.mutable_plugin() = job_plugin();
    r.set_processes(5);
  });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.config_toml(), "[env]\nname = \"cartpole\"\n");
  EXPECT_FALSE(reply.session().empty());
  EXPECT_EQ(reply.job_id(), "job-17");
  EXPECT_EQ(reply.incarnation(), "incarnation-1");
  EXPECT_EQ(reply.slot_bytes(), slot_bytes());
  EXPECT_EQ(reply.spec_hash(), buffer::spec_hash(cartpole_spec()));
  EXPECT_EQ(reply.policy_version(), slab_->version());
  EXPECT_EQ(reply.processes(), 5u);
  EXPECT_EQ(reply.previous_session_received(), -1);
  EXPECT_EQ(reply.plugin().sha256(), job_plugin().sha256());
  v1::JoinReply again;
  ASSERT_TRUE(join(again, "node-b").ok());
  EXPECT_NE(again.session(), reply.session()) << "a session is new at every join";
}

TEST_F(GatewayTest, UnrollsArriveInTheRingByteForByteWithTheirStampAndAreAcked) {
  UnrollClient client(*stub_, join_session());
  ASSERT_TRUE(client.wait_credits(1)) << "no credit within 5 s";
  std::this_thread::sleep_for(200ms);  // every credit the gateway will grant now
  const uint64_t credits = client.credits();
  EXPECT_LE(credits, kCredits);
  EXPECT_EQ(client.replies().front().processes(), 3u);
  for (uint64_t sequence = 1; sequence <= credits; ++sequence) {
    ASSERT_TRUE(client.send(unroll(sequence, slot_bytes())));
  }
  ASSERT_TRUE(client.wait_for([&] { return client.acked_ == credits; }))
      << "acked " << client.acked();
  const auto counters = ring_->counters();
  EXPECT_EQ(counters.committed, credits);
  EXPECT_EQ(gateway_->committed(), credits);
  uint64_t previous = 0;
  for (const auto& reply : client.replies()) {  // cumulative: never backwards
    EXPECT_GE(reply.acked(), previous);
    previous = reply.acked();
  }
  for (uint64_t i = 0; i < credits; ++i) {
    auto taken = ring_->take(1, 1, 1000, 2s);
    ASSERT_TRUE(taken);
    const buffer::TakenSlot& slot = taken->front();
    const uint64_t sequence = static_cast<uint64_t>(slot.stamp.env_us) - 100;
    const v1::UnrollMessage sent = unroll(sequence, slot_bytes());
    EXPECT_EQ(std::memcmp(slot.data, sent.slot().data(), slot_bytes()), 0) << "unroll " << sequence;
    EXPECT_EQ(slot.stamp.policy_version, 1u);
    EXPECT_EQ(slot.stamp.episodes, sent.episodes());
    EXPECT_EQ(slot.stamp.actor, 3u);
    EXPECT_EQ(slot.stamp.policy_us, 200u);
    EXPECT_EQ(slot.stamp.wait_us, 300u);
    ring_->release(*taken);
  }
  EXPECT_TRUE(client.finish(true).ok());
}

TEST_F(GatewayTest, CreditsStopWhileTheRingIsFullAndComeBackWhenTheLearnerTakes) {
  UnrollClient client(*stub_, join_session());
  ASSERT_TRUE(client.wait_credits(kCredits));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(client.credits(), kCredits) << "more credits than remote.credits";
  // Memory bounded: the gateway holds exactly its credits, the rest is FREE.
  EXPECT_EQ(fill_free_slots(), kSlots - kCredits);
  for (uint64_t sequence = 1; sequence <= kCredits; ++sequence) {
    ASSERT_TRUE(client.send(unroll(sequence, slot_bytes())));
  }
  ASSERT_TRUE(client.wait_for([&] { return client.acked_ == kCredits; }));
  std::this_thread::sleep_for(500ms);  // no FREE slot: no credit may come
  EXPECT_EQ(client.credits(), kCredits);
  drain(2);
  ASSERT_TRUE(client.wait_credits(kCredits + 2)) << "no credit after the learner took";
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(client.credits(), kCredits + 2) << "granted slots that are not FREE";
  EXPECT_EQ(client.finish(true).error_code(), StatusCode::OK);
  // The two unused credits went back FREE (the rest of the ring is READY).
  EXPECT_EQ(fill_freed_slots(2), 2u);
  EXPECT_GE(ring_->counters().abandoned, 2u);
}

// Several nodes at once, each sending as fast as its credits allow, while
// the learner takes: every unroll lands once, whole, and is acked.
TEST_F(GatewayTest, SeveralNodesStreamingAtOnceLoseAndMixNothing) {
  constexpr int kNodes = 3;
  constexpr uint64_t kEach = 150;
  std::atomic<bool> stop{false};
  std::vector<uint64_t> seen(kNodes * (kEach + 1), 0);
  std::atomic<uint64_t> taken{0}, mixed{0};
  std::thread learner([&] {
    while (!stop && taken < kNodes * kEach) {
      auto got = ring_->take(1, 1, 1000, 100ms);
      if (!got) continue;
      const buffer::TakenSlot& slot = got->front();
      const uint64_t sequence = slot.stamp.env_us - 100;
      const v1::UnrollMessage sent = unroll(sequence, slot_bytes());
      if (std::memcmp(slot.data, sent.slot().data(), slot_bytes()) != 0) ++mixed;
      ++seen[slot.stamp.actor * (kEach + 1) + sequence];
      ring_->release(*got);
      ++taken;
    }
  });
  std::vector<std::thread> nodes;
  std::vector<uint64_t> acked(kNodes);
  for (int n = 0; n < kNodes; ++n) {
    nodes.emplace_back([&, n] {
      UnrollClient client(*stub_, join_session("node-" + std::to_string(n)));
      for (uint64_t sequence = 1; sequence <= kEach; ++sequence) {
        if (!client.wait_credits(sequence)) break;
        v1::UnrollMessage m = unroll(sequence, slot_bytes());
        m.set_actor(static_cast<uint32_t>(n));
        if (!client.send(m)) break;
      }
      client.wait_for([&] { return client.acked_ == kEach; });
      acked[n] = client.acked();
      client.finish(true);
    });
  }
  for (auto& node : nodes) node.join();
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (taken < kNodes * kEach && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  stop = true;
  learner.join();
  for (int n = 0; n < kNodes; ++n) EXPECT_EQ(acked[n], kEach) << "node " << n;
  EXPECT_EQ(taken.load(), kNodes * kEach);
  EXPECT_EQ(mixed.load(), 0u);
  EXPECT_EQ(gateway_->committed(), kNodes * kEach);
  uint64_t twice = 0;
  for (int n = 0; n < kNodes; ++n) {
    for (uint64_t q = 1; q <= kEach; ++q) twice += seen[n * (kEach + 1) + q] != 1;
  }
  EXPECT_EQ(twice, 0u) << "unrolls missing or delivered twice";
}

// A stream sending `bad` after its credits came ends with `code`.
struct BadUnroll {
  const char* what;
  StatusCode code;
  std::function<v1::UnrollMessage(size_t slot_bytes)> make;
};

TEST_F(GatewayTest, AMalformedUnrollEndsTheStream) {
  const BadUnroll cases[] = {
      {"wrong checksum", StatusCode::DATA_LOSS,
       [](size_t bytes) {
         auto m = unroll(1, bytes);
         m.set_checksum(m.checksum() ^ 1);
         return m;
       }},
      {"short slot", StatusCode::INVALID_ARGUMENT,
       [](size_t bytes) {
         auto m = unroll(1, bytes - 1);
         return m;
       }},
      {"skipped sequence", StatusCode::INVALID_ARGUMENT,
       [](size_t bytes) { return unroll(2, bytes); }},
      {"policy newer than the slab's", StatusCode::INVALID_ARGUMENT,
       [](size_t bytes) { return unroll(1, bytes, 2); }},
      {"more episodes than env steps", StatusCode::INVALID_ARGUMENT,
       [](size_t bytes) {
         auto m = unroll(1, bytes);
         m.set_episodes(1u << 30);
         return m;
       }},
  };
  int node = 0;
  for (const BadUnroll& bad : cases) {
    SCOPED_TRACE(bad.what);
    UnrollClient client(*stub_, join_session("node-" + std::to_string(node++)));
    ASSERT_TRUE(client.wait_credits(1));
    client.send(bad.make(slot_bytes()));
    const grpc::Status status = client.finish();
    EXPECT_EQ(status.error_code(), bad.code) << status.error_message();
  }
  EXPECT_EQ(ring_->counters().committed, 0u);
  EXPECT_EQ(gateway_->committed(), 0u);
}

TEST_F(GatewayTest, AnUnrollWithoutCreditEndsTheStream) {
  UnrollClient client(*stub_, join_session());
  ASSERT_TRUE(client.wait_credits(kCredits));
  fill_free_slots();  // the gateway can grant nothing more
  for (uint64_t sequence = 1; sequence <= kCredits + 1; ++sequence) {
    client.send(unroll(sequence, slot_bytes()));
  }
  const grpc::Status status = client.finish();
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION) << status.error_message();
  EXPECT_EQ(gateway_->committed(), kCredits);
}

// A node that leaves (half-closes) right after its last unroll still hears
// that every unroll it sent was committed: otherwise it would count
// unrolls that are in the learner's ring as lost in flight.
TEST_F(GatewayTest, EveryCommittedUnrollIsAckedBeforeAHalfClosedStreamEnds) {
  for (int round = 0; round < 20; ++round) {
    SCOPED_TRACE(round);
    // A node per round: the learner may not have seen the last one's stream end yet.
    UnrollClient client(*stub_, join_session("node-" + std::to_string(round)));
    ASSERT_TRUE(client.wait_credits(kCredits));
    for (uint64_t sequence = 1; sequence <= kCredits; ++sequence) {
      ASSERT_TRUE(client.send(unroll(sequence, slot_bytes())));
    }
    EXPECT_TRUE(client.finish(true).ok());
    EXPECT_EQ(gateway_->committed(), (round + 1) * kCredits);
    EXPECT_EQ(client.acked(), kCredits) << "committed, never acked";
    drain(kCredits);
  }
}

// The same when the job ends while unrolls are in flight.
TEST_F(GatewayTest, EveryCommittedUnrollIsAckedWhenTheJobEnds) {
  UnrollClient client(*stub_, join_session());
  ASSERT_TRUE(client.wait_credits(kCredits));
  std::thread ender([&] { gateway_->end_job(); });
  for (uint64_t sequence = 1; sequence <= kCredits; ++sequence) {
    client.send(unroll(sequence, slot_bytes()));
  }
  EXPECT_TRUE(client.finish().ok());
  ender.join();
  EXPECT_EQ(client.acked(), gateway_->committed()) << "committed, never acked";
}

TEST_F(GatewayTest, AnUnknownSessionIsRefused) {
  UnrollClient client(*stub_, "no-such-session");
  const grpc::Status status = client.finish();
  EXPECT_EQ(status.error_code(), StatusCode::FAILED_PRECONDITION) << status.error_message();
  grpc::ClientContext context;
  authorise(context, "no-such-session");
  auto weights = stub_->StreamWeights(&context, v1::StreamWeightsRequest());
  v1::WeightsChunk chunk;
  EXPECT_FALSE(weights->Read(&chunk));
  EXPECT_EQ(weights->Finish().error_code(), StatusCode::FAILED_PRECONDITION);
  UnrollClient no_session(*stub_, "");
  EXPECT_EQ(no_session.finish().error_code(), StatusCode::FAILED_PRECONDITION);
  const std::string session = join_session();
  UnrollClient open(*stub_, session);
  ASSERT_TRUE(open.wait_credits(1));
  UnrollClient second(*stub_, session);  // one stream per session
  EXPECT_EQ(second.finish().error_code(), StatusCode::ALREADY_EXISTS);
}

TEST_F(GatewayTest, ARejoinLearnsExactlyWhatThePreviousSessionCommitted) {
  const std::string first = join_session();
  UnrollClient client(*stub_, first);
  ASSERT_TRUE(client.wait_credits(kCredits));
  for (uint64_t sequence = 1; sequence <= 3; ++sequence) {
    ASSERT_TRUE(client.send(unroll(sequence, slot_bytes())));
  }
  ASSERT_TRUE(client.wait_for([&] { return client.acked_ == 3; }));
  // Credits come back as unrolls land: held slots never exceed remote.credits.
  ASSERT_TRUE(client.wait_credits(kCredits + 3));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(client.credits(), kCredits + 3);
  const uint64_t abandoned_before = ring_->counters().abandoned;

  v1::JoinReply reply;
  ASSERT_TRUE(
      join(reply, "node-a", [&](v1::JoinRequest& r) { r.set_previous_session(first); }).ok());
  EXPECT_NE(reply.session(), first);
  EXPECT_EQ(reply.previous_session_received(), 3);
  const grpc::Status old = client.finish();
  EXPECT_EQ(old.error_code(), StatusCode::ABORTED) << old.error_message();
  const auto counters = ring_->counters();
  EXPECT_EQ(counters.committed, 3u);
  EXPECT_EQ(counters.abandoned - abandoned_before, kCredits) << "held slots go back FREE";
  EXPECT_EQ(fill_freed_slots(kSlots - 3), kSlots - 3)
      << "every slot but the committed ones is FREE";

  UnrollClient stale(*stub_, first);  // the old session is over
  EXPECT_EQ(stale.finish().error_code(), StatusCode::FAILED_PRECONDITION);
}

TEST_F(GatewayTest, ARejoinNamingAnotherNodesSessionEndsNothingAndLearnsNothing) {
  const std::string first = join_session("node-a");
  UnrollClient client(*stub_, first);
  ASSERT_TRUE(client.wait_credits(1));
  ASSERT_TRUE(client.send(unroll(1, slot_bytes())));
  ASSERT_TRUE(client.wait_for([&] { return client.acked_ == 1; }));

  v1::JoinReply reply;
  ASSERT_TRUE(
      join(reply, "node-b", [&](v1::JoinRequest& r) { r.set_previous_session(first); }).ok());
  EXPECT_EQ(reply.previous_session_received(), -1);
  ASSERT_TRUE(client.send(unroll(2, slot_bytes())));  // node-a's session goes on
  EXPECT_TRUE(client.wait_for([&] { return client.acked_ == 2; }));
}

TEST_F(GatewayTest, ASecondNodeOfAConnectedNameIsRefusedAndABadNameToo) {
  UnrollClient first(*stub_, join_session("twin"));
  ASSERT_TRUE(first.wait_credits(1));
  v1::JoinReply reply;
  const grpc::Status twin = join(reply, "twin");
  EXPECT_EQ(twin.error_code(), StatusCode::ALREADY_EXISTS) << twin.error_message();
  EXPECT_NE(twin.error_message().find("already connected"), std::string::npos);
  for (const std::string& name :
       std::vector<std::string>{"", "a b", "new\nline", std::string(65, 'x')}) {
    EXPECT_EQ(join(reply, name).error_code(), StatusCode::INVALID_ARGUMENT) << name;
  }
}

// Credits follow what a node says is waiting: one that has sent and has
// nothing more holds one slot, so idle nodes cannot tie the ring up.
TEST_F(GatewayTest, ANodeWithNothingWaitingHoldsOneSlot) {
  UnrollClient client(*stub_, join_session());
  ASSERT_TRUE(client.wait_credits(kCredits));
  v1::UnrollMessage idle = unroll(1, slot_bytes());
  idle.set_waiting(0);
  ASSERT_TRUE(client.send(idle));
  ASSERT_TRUE(client.wait_for([&] { return client.acked_ == 1; }));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(client.credits(), kCredits) << "a slot was given back, and no more";
  drain(1);
  std::this_thread::sleep_for(300ms);
  // kCredits − 1 held from the opening window (at most), none granted since.
  EXPECT_EQ(client.credits(), kCredits);
  EXPECT_TRUE(client.finish(true).ok());
}

}  // namespace
}  // namespace pronghorn::remote::testing
