// The actor node's two streams against a fake gateway in this process (no
// network): the uploader (credits, demand, the last ack at a half-close,
// other incarnations discarded) and the Join's retries of a taken name.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "actor/job_check.h"
#include "buffer/process.h"
#include "buffer/segment_names.h"
#include "buffer/weight_slab.h"
#include "core/error.h"
#include "remote/actor_node.h"
#include "remote/node_session.h"
#include "remote/node_uploader.h"
#include "remote/node_weights.h"
#include "remote/testing/weight_chunks.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using testing::chunks_of;
using testing::ramp;

using Result = WeightAssembler::Result;

// A learner's side of the two streams, in this process: versions of weights
// out, unrolls in, job_ended after `until`. Credits: `first_credits`, then
// one back per unroll, or (`demand`) up to the unroll's waiting + 1, at most
// `cap`, as the learner grants them. `ack_at_close`: no acks until the node
// half-closes, then one for all; `silent_at_close`: none even then.
class FakeGateway final : public v1::ActorGateway::Service {
 public:
  std::vector<std::vector<float>> versions;  // sent as learner versions 1, 2, …
  uint32_t until = 3;                        // unrolls taken before the job ends
  uint32_t first_credits = 2;
  bool demand = false;
  uint32_t cap = 1;
  bool ack_at_close = false, silent_at_close = false;
  uint32_t duplicate_joins = 0;  // Joins answered ALREADY_EXISTS before one is taken
  std::vector<v1::UnrollMessage> got;
  std::atomic<size_t> count{0};  // of `got`, for the test to wait on
  std::vector<std::string> sessions;
  std::atomic<uint32_t> joins{0};

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest* request,
                    v1::JoinReply* reply) override {
    if (joins++ < duplicate_joins) {
      return {grpc::StatusCode::ALREADY_EXISTS,
              "node " + request->node_name() + " is already connected from ipv4:10.0.0.9:4000"};
    }
    reply->set_session("s1");
    return grpc::Status::OK;
  }

  grpc::Status StreamWeights(grpc::ServerContext* context, const v1::StreamWeightsRequest*,
                             grpc::ServerWriter<v1::WeightsChunk>* writer) override {
    for (size_t v = 0; v < versions.size(); ++v) {
      for (const auto& c : chunks_of(v + 1, versions[v], 100)) writer->Write(c);
    }
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return grpc::Status::OK;
  }

  grpc::Status StreamUnrolls(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::UnrollReply, v1::UnrollMessage>* stream) override {
    const auto session = context->client_metadata().find(kSessionMetadata)->second;
    sessions.emplace_back(session.data(), session.size());
    v1::UnrollReply reply;
    reply.set_credits(first_credits);
    reply.set_processes(3);
    stream->Write(reply);
    uint32_t held = first_credits;
    v1::UnrollMessage m;
    while (got.size() < until) {
      if (!stream->Read(&m)) {  // the node half-closed
        if (silent_at_close) {
          while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return grpc::Status::CANCELLED;
        }
        reply.set_credits(0);
        stream->Write(reply);
        return grpc::Status::OK;
      }
      got.push_back(m);
      ++count;
      --held;
      reply.set_acked(m.sequence());
      const uint32_t wanted = demand ? std::min(m.waiting() + 1, cap) : held + 1;
      reply.set_credits(wanted > held ? wanted - held : 0);
      held += reply.credits();
      if (!ack_at_close) stream->Write(reply);
    }
    reply.set_credits(0);
    reply.set_job_ended(true);
    stream->Write(reply);
    return grpc::Status::OK;
  }
};

// Commits one unroll acted with local slab version `version`, its bytes a
// pattern of `fill`.
void commit_unroll(buffer::Ring& ring, uint64_t version, uint8_t fill) {
  const auto slot = ring.claim(std::chrono::milliseconds(100));
  ASSERT_TRUE(slot.has_value());
  std::memset(ring.slot_data(*slot), fill, ring.layout().bytes);
  ring.commit(*slot, {.policy_version = version, .episodes = 2, .actor = 5});
}

TEST(UploaderTest, SendsWholeSlotsWithTheLearnersVersionPerCreditAndDiscardsOtherIncarnations) {
  FakeGateway gateway;
  gateway.versions = {ramp(60), ramp(60, 3.0f)};
  grpc::ServerBuilder builder;
  builder.RegisterService(&gateway);
  auto server = builder.BuildAndStart();
  grpc::ChannelArguments arguments;
  auto stub = v1::ActorGateway::NewStub(server->InProcessChannel(arguments));

  const std::string run = "node-test-" + std::to_string(getpid());
  const buffer::UnrollSpec spec{.T = 2, .K = 1, .obs_shape = {4}};
  auto ring = buffer::Ring::create(buffer::own_segment_name(buffer::kRingSegment, run), spec, 8);
  LocalWeights weights(buffer::own_segment_name(buffer::kSlabSegment, run));
  weights.publish("old", 40, ramp(60));  // local version 1: the learner before a resume
  commit_unroll(*ring, 1, 0x11);         // acted with it: never sent

  WeightsReceiver receiver(*stub, "t", "s1", "new", weights);
  std::atomic<int> alive{2};
  Uploader uploader(*stub, {"t", "s1", "new"}, *ring, weights, receiver.ready_flag(), alive);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (weights.newest() != LearnerVersion{"new", 2} &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(weights.newest(), (LearnerVersion{"new", 2}));  // local versions 2 and 3
  for (uint8_t i = 0; i < 3; ++i) commit_unroll(*ring, 2 + i % 2, 0x20 + i);
  while (!uploader.ended() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const Uploader::Result r = uploader.finish();
  receiver.finish();
  EXPECT_TRUE(r.job_ended);
  EXPECT_EQ(r.sent, 3u);
  EXPECT_EQ(r.acked, 3u);
  EXPECT_EQ(r.discarded, 1u) << "the old incarnation's unroll";
  EXPECT_EQ(uploader.wanted_processes(), 3);
  EXPECT_EQ(uploader.wanted_processes(), std::nullopt) << "told once";
  ASSERT_EQ(gateway.got.size(), 3u);
  EXPECT_EQ(gateway.sessions, std::vector<std::string>{"s1"});
  for (size_t i = 0; i < 3; ++i) {
    const v1::UnrollMessage& m = gateway.got[i];
    EXPECT_EQ(m.sequence(), i + 1);
    EXPECT_EQ(m.policy_version(), 1 + i % 2) << "the learner's version, not the slab's";
    EXPECT_EQ(m.slot(), std::string(ring->layout().bytes, static_cast<char>(0x20 + i)));
    EXPECT_EQ(m.checksum(), crc32_of(m.slot().data(), m.slot().size()));
    EXPECT_EQ(m.episodes(), 2u);
    EXPECT_EQ(m.actor(), 5u);
    EXPECT_EQ(m.processes_alive(), 2u);
    EXPECT_LE(m.waiting(), 2 - i) << "at most those committed after it";
  }
  EXPECT_EQ(ring->counters().ready, 0u);
  server->Shutdown(std::chrono::system_clock::now());
}

// One session's uploader against a FakeGateway: the ring, the slab with
// learner version 1 of incarnation "inc" in it, and the stub.
class UploaderFixture : public ::testing::Test {
 protected:
  void SetUp() override { gateway.versions = {ramp(60)}; }
  void start() {
    grpc::ServerBuilder builder;
    builder.RegisterService(&gateway);
    server = builder.BuildAndStart();
    grpc::ChannelArguments arguments;
    stub = v1::ActorGateway::NewStub(server->InProcessChannel(arguments));
    const std::string run = "node-test-" + std::to_string(getpid());
    ring = buffer::Ring::create(buffer::own_segment_name(buffer::kRingSegment, run),
                                {.T = 2, .K = 1, .obs_shape = {4}}, 8);
    weights = std::make_unique<LocalWeights>(buffer::own_segment_name(buffer::kSlabSegment, run));
    receiver = std::make_unique<WeightsReceiver>(*stub, "t", "s1", "inc", *weights);
    ASSERT_TRUE(wait_until([&] { return weights->newest() == LearnerVersion{"inc", 1}; }));
  }
  Uploader make_uploader() {
    return Uploader(*stub, {"t", "s1", "inc"}, *ring, *weights, receiver->ready_flag(), alive);
  }
  void TearDown() override {
    if (receiver) receiver->finish();
    if (server) server->Shutdown(std::chrono::system_clock::now());
  }
  static bool wait_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  FakeGateway gateway;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::ActorGateway::Stub> stub;
  std::unique_ptr<buffer::Ring> ring;
  std::unique_ptr<LocalWeights> weights;
  std::unique_ptr<WeightsReceiver> receiver;
  std::atomic<int> alive{1};
};

TEST_F(UploaderFixture, SaysHowManyWaitAndSendsAllOnOneCreditAtATime) {
  gateway.first_credits = 1;
  gateway.demand = true;
  gateway.cap = 1;
  gateway.until = 5;
  start();
  for (uint8_t i = 0; i < 3; ++i) commit_unroll(*ring, 1, 0x30 + i);
  Uploader uploader = make_uploader();
  ASSERT_TRUE(wait_until([&] { return gateway.count >= 3; }));
  commit_unroll(*ring, 1, 0x40);
  commit_unroll(*ring, 1, 0x41);
  ASSERT_TRUE(wait_until([&] { return uploader.ended(); }));
  const Uploader::Result r = uploader.finish();
  EXPECT_TRUE(r.job_ended);
  EXPECT_EQ(r.sent, 5u);
  EXPECT_EQ(r.acked, 5u);
  ASSERT_EQ(gateway.got.size(), 5u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(gateway.got[i].waiting(), 2 - i) << "committed behind unroll " << i + 1;
  }
  EXPECT_LE(gateway.got[3].waiting(), 1u);
  EXPECT_EQ(gateway.got[4].waiting(), 0u);
  EXPECT_EQ(ring->counters().ready, 0u);
}

TEST_F(UploaderFixture, AFinishHalfClosesAndTakesTheLearnersLastAck) {
  gateway.first_credits = 8;
  gateway.until = 100;
  gateway.ack_at_close = true;
  start();
  for (uint8_t i = 0; i < 4; ++i) commit_unroll(*ring, 1, 0x50 + i);
  Uploader uploader = make_uploader();
  ASSERT_TRUE(wait_until([&] { return gateway.count >= 4; }));
  EXPECT_EQ(uploader.acked(), 0u) << "the gateway acks only at the close";
  const auto start = std::chrono::steady_clock::now();
  const Uploader::Result r = uploader.finish();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(r.sent, 4u);
  EXPECT_EQ(r.acked, 4u) << "the ack that answered the half-close";
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_FALSE(r.job_ended);
}

TEST_F(UploaderFixture, AFinishWaitsForALearnerThatNeverAcksTwoSecondsAtMost) {
  gateway.first_credits = 8;
  gateway.until = 100;
  gateway.ack_at_close = true;
  gateway.silent_at_close = true;
  start();
  for (uint8_t i = 0; i < 2; ++i) commit_unroll(*ring, 1, 0x60 + i);
  Uploader uploader = make_uploader();
  ASSERT_TRUE(wait_until([&] { return gateway.count >= 2; }));
  const auto start = std::chrono::steady_clock::now();
  const Uploader::Result r = uploader.finish();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(1900)) << "it waited for the ack";
  EXPECT_LT(took, std::chrono::milliseconds(3500));
  EXPECT_EQ(r.sent, 2u);
  EXPECT_EQ(r.acked, 0u) << "unacked: the rejoin or the tally counts them lost";
}

// join_learner against a gateway that says the name is taken.
struct DuplicateJoin {
  FakeGateway gateway;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::ActorGateway::Stub> stub;
  JoinCall call{.learner = "h:1", .token = "t", .give_up_after_s = 60};
  v1::JoinRequest request;
  Backoff backoff{7};
  std::atomic<bool> stop{false};

  explicit DuplicateJoin(uint32_t refusals) {
    gateway.duplicate_joins = refusals;
    grpc::ServerBuilder builder;
    builder.RegisterService(&gateway);
    server = builder.BuildAndStart();
    grpc::ChannelArguments arguments;
    stub = v1::ActorGateway::NewStub(server->InProcessChannel(arguments));
    request.set_node_name("gpu-box-3");
  }
  ~DuplicateJoin() { server->Shutdown(std::chrono::system_clock::now()); }
  JoinEnd join(v1::JoinReply& reply) {
    return join_learner(
        *stub, call, request, backoff, false, stop, [] {}, reply);
  }
};

TEST(JoinLearnerTest, ANameStillTakenIsTriedAgainWithBackOff) {
  DuplicateJoin d(2);  // the learner notices the dead predecessor after two tries
  v1::JoinReply reply;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(d.join(reply), JoinEnd::kJoined);
  EXPECT_EQ(reply.session(), "s1");
  EXPECT_EQ(d.gateway.joins, 3u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1100))
      << "backed off 0.5 s and 1 s, jittered";
}

TEST(JoinLearnerTest, ANameTakenForThePatienceIsRefusedNamingTheNameAndTheWayOut) {
  DuplicateJoin d(1000);
  d.call.duplicate_patience = std::chrono::milliseconds(1200);
  v1::JoinReply reply;
  const auto start = std::chrono::steady_clock::now();
  try {
    d.join(reply);
    FAIL() << "a node joined under a taken name";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'gpu-box-3'"), std::string::npos) << what;
    EXPECT_NE(what.find("--name"), std::string::npos) << what;
    EXPECT_NE(what.find("already connected"), std::string::npos) << what;
  }
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(1200));
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_GE(d.gateway.joins, 2u) << "tried again before giving up";
}

}  // namespace
}  // namespace pronghorn::remote
