// The actor gateway's StreamWeights, scaling a node, and how its streams end
// (remote/actor_gateway.h).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "remote/testing/gateway_fixture.h"

namespace pronghorn::remote::testing {
namespace {

using namespace std::chrono_literals;
using grpc::StatusCode;

// A node's StreamWeights.
struct WeightsClient {
  WeightsClient(v1::ActorGateway::Stub& stub, const std::string& session) {
    authorise(context, session);
    stream = stub.StreamWeights(&context, v1::StreamWeightsRequest());
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WeightsChunk>> stream;
};

// A node asks for its own count at every join (restarted with another
// --processes, it runs that many); only `pronghorn scale --node` overrides it.
TEST_F(GatewayTest, TheProcessCountIsTheNodesOwnUntilScaled) {
  v1::JoinReply reply;
  ASSERT_TRUE(join(reply, "node-a", [](v1::JoinRequest& r) { r.set_processes(0); }).ok());
  EXPECT_EQ(reply.processes(), 1u) << "none asked: remote default";
  ASSERT_TRUE(join(reply, "node-a", [](v1::JoinRequest& r) { r.set_processes(5); }).ok());
  EXPECT_EQ(reply.processes(), 5u) << "the node restarted with --processes 5";
  ASSERT_TRUE(gateway_->scale("node-a", 2));
  ASSERT_TRUE(join(reply, "node-a", [](v1::JoinRequest& r) { r.set_processes(6); }).ok());
  EXPECT_EQ(reply.processes(), 2u) << "a count set by scale wins";
}

TEST_F(GatewayTest, ScaleReachesTheNodeAndNodesListsIt) {
  UnrollClient client(*stub_, join_session("node-a"));
  ASSERT_TRUE(client.wait_credits(1));
  EXPECT_FALSE(gateway_->scale("node-z", 2));
  ASSERT_TRUE(gateway_->scale("node-a", 7));
  ASSERT_TRUE(client.wait_for([&] { return client.replies_.back().processes() == 7; }));
  ASSERT_TRUE(client.send(unroll(1, slot_bytes())));
  ASSERT_TRUE(client.wait_for([&] { return client.acked_ == 1; }));

  auto nodes = gateway_->nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name(), "node-a");
  EXPECT_TRUE(nodes[0].connected());
  EXPECT_EQ(nodes[0].unrolls(), 1u);
  EXPECT_EQ(nodes[0].sessions(), 1u);
  EXPECT_EQ(nodes[0].processes_desired(), 7u);
  EXPECT_EQ(nodes[0].processes_alive(), 2u);
  EXPECT_EQ(nodes[0].disconnects(), 0u);

  EXPECT_TRUE(client.finish(true).ok());
  const auto deadline = std::chrono::steady_clock::now() + 2s;
  while (gateway_->nodes()[0].connected() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  nodes = gateway_->nodes();
  EXPECT_FALSE(nodes[0].connected());
  EXPECT_EQ(nodes[0].disconnects(), 1u) << "a stream ended without the job ending";

  v1::JoinReply reply;  // a count set by scale wins over the node's own
  ASSERT_TRUE(join(reply, "node-a").ok());
  EXPECT_EQ(reply.processes(), 7u);
  EXPECT_EQ(gateway_->nodes()[0].sessions(), 2u);
}

TEST_F(GatewayTest, WeightsArriveWholeInChunksAndEachNewerVersionFollows) {
  WeightsClient client(*stub_, join_session());
  auto first = read_version(*client.stream);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->version, 1u);
  EXPECT_EQ(first->bytes, slab_bytes());
  EXPECT_EQ(first->checksum, crc32_of(first->bytes.data(), first->bytes.size()));
  EXPECT_EQ(first->chunks, 3u);
  EXPECT_LE(first->largest_chunk, kWeightChunkBytes);

  ASSERT_EQ(publish(2.5f), 2u);
  auto second = read_version(*client.stream);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->version, 2u);
  EXPECT_EQ(second->bytes, slab_bytes());
  EXPECT_EQ(second->checksum, crc32_of(second->bytes.data(), second->bytes.size()));

  // A second node's stream starts from the newest.
  WeightsClient late(*stub_, join_session("node-b"));
  auto newest = read_version(*late.stream);
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->version, 2u);
  EXPECT_EQ(newest->bytes, second->bytes);
  client.context.TryCancel();
  late.context.TryCancel();
}

TEST_F(GatewayTest, ASlowWeightsReaderSkipsToTheNewestVersion) {
  WeightsClient client(*stub_, join_session());
  ASSERT_TRUE(read_version(*client.stream));
  constexpr int kPublished = 12;
  for (int i = 0; i < kPublished; ++i) {  // the node reads nothing meanwhile
    publish(static_cast<float>(i));
    std::this_thread::sleep_for(3 * std::chrono::milliseconds(ActorGateway::kWeightsIntervalMs));
  }
  const uint64_t newest = slab_->version();
  const std::string newest_bytes = slab_bytes();
  std::vector<uint64_t> versions;
  std::string last;
  while (versions.empty() || versions.back() < newest) {
    auto got = read_version(*client.stream);
    ASSERT_TRUE(got) << "the stream ended before version " << newest;
    EXPECT_EQ(got->checksum, crc32_of(got->bytes.data(), got->bytes.size()));
    if (!versions.empty()) {
      EXPECT_GT(got->version, versions.back());
    }
    versions.push_back(got->version);
    last = got->bytes;
  }
  EXPECT_LT(versions.size(), static_cast<size_t>(kPublished)) << "sent every version";
  EXPECT_EQ(last, newest_bytes);
  client.context.TryCancel();
}

// One weights stream per session; one whose node went away while no new
// version came ends at once (it would otherwise wait for a version that an
// idle learner never publishes), so the session may open another.
TEST_F(GatewayTest, OneWeightsStreamPerSessionAndACancelledOneEndsAtOnce) {
  const std::string session = join_session();
  auto first = std::make_unique<WeightsClient>(*stub_, session);
  ASSERT_TRUE(read_version(*first->stream));
  WeightsClient second(*stub_, session);
  v1::WeightsChunk chunk;
  EXPECT_FALSE(second.stream->Read(&chunk));
  EXPECT_EQ(second.stream->Finish().error_code(), StatusCode::ALREADY_EXISTS);

  first->context.TryCancel();
  first.reset();
  bool reopened = false;
  for (int attempt = 0; attempt < 50 && !reopened; ++attempt) {
    WeightsClient again(*stub_, session);
    reopened = read_version(*again.stream).has_value();
    if (!reopened) std::this_thread::sleep_for(20ms);
    again.context.TryCancel();
  }
  EXPECT_TRUE(reopened) << "the cancelled stream still counts as open";
}

TEST_F(GatewayTest, EndJobTellsEveryStreamAndRefusesNewJoins) {
  UnrollClient a(*stub_, join_session("node-a"));
  UnrollClient b(*stub_, join_session("node-b"));
  WeightsClient weights(*stub_, join_session("node-c"));
  ASSERT_TRUE(read_version(*weights.stream));
  ASSERT_TRUE(a.wait_credits(1));
  ASSERT_TRUE(b.wait_credits(1));
  ASSERT_TRUE(a.send(unroll(1, slot_bytes())));
  ASSERT_TRUE(a.wait_for([&] { return a.acked_ == 1; }));

  const auto start = std::chrono::steady_clock::now();
  gateway_->end_job();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2500ms);
  for (UnrollClient* client : {&a, &b}) {
    const grpc::Status status = client->finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    const auto replies = client->replies();
    ASSERT_FALSE(replies.empty());
    EXPECT_TRUE(replies.back().job_ended());
  }
  v1::WeightsChunk chunk;
  EXPECT_FALSE(weights.stream->Read(&chunk));
  EXPECT_TRUE(weights.stream->Finish().ok());
  for (const auto& node : gateway_->nodes()) {
    EXPECT_EQ(node.disconnects(), 0u) << node.name();
  }

  v1::JoinReply reply;
  EXPECT_EQ(join(reply, "node-d").error_code(), StatusCode::UNAVAILABLE);
  // Every held slot went back: all but the one committed are FREE.
  EXPECT_EQ(fill_freed_slots(kSlots - 1), kSlots - 1);
}

TEST_F(GatewayTest, DestroyingTheGatewayEndsOpenStreamsUnavailable) {
  UnrollClient unrolls(*stub_, join_session("node-a"));
  WeightsClient weights(*stub_, join_session("node-b"));
  ASSERT_TRUE(read_version(*weights.stream));
  ASSERT_TRUE(unrolls.wait_credits(kCredits));
  const auto start = std::chrono::steady_clock::now();
  gateway_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(unrolls.finish().error_code(), StatusCode::UNAVAILABLE);
  v1::WeightsChunk chunk;
  EXPECT_FALSE(weights.stream->Read(&chunk));
  EXPECT_EQ(weights.stream->Finish().error_code(), StatusCode::UNAVAILABLE);
  EXPECT_EQ(fill_freed_slots(kSlots), kSlots) << "the held slots go back FREE";
}

// A node that stops reading mid-version holds a write the gateway cannot
// finish: destroying the gateway still returns (the server's shutdown
// deadline cancels the call).
TEST_F(GatewayTest, DestroyingTheGatewayDoesNotWaitForANodeThatStoppedReading) {
  WeightsClient weights(*stub_, join_session());
  for (int i = 0; i < 4; ++i) {  // versions enough to fill every buffer between the two
    publish(static_cast<float>(i));
    std::this_thread::sleep_for(50ms);
  }
  const auto start = std::chrono::steady_clock::now();
  gateway_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 6s);
  weights.context.TryCancel();
}

TEST_F(GatewayTest, AnUnrollLargerThanTheMessageLimitIsRefused) {
  UnrollClient client(*stub_, join_session());
  ASSERT_TRUE(client.wait_credits(1));
  client.send(unroll(1, slot_bytes() + 8192));
  const grpc::Status status = client.finish();
  EXPECT_EQ(status.error_code(), StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_EQ(gateway_->committed(), 0u);
  v1::JoinReply reply;
  EXPECT_TRUE(join(reply, "node-b").ok()) << "the gateway still serves";
}

}  // namespace
}  // namespace pronghorn::remote::testing
