// The actor gateway in one process (remote/actor_gateway.h): a real ring and
// slab, the gateway on loopback, and a raw gRPC client speaking
// proto/remote.proto the way a node does. Every client wait has a deadline.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "buffer/testing/names.h"
#include "proto/remote.grpc.pb.h"
#include "remote/actor_gateway.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using namespace std::chrono_literals;
using grpc::StatusCode;

constexpr uint32_t kSlots = 8;
constexpr uint32_t kCredits = 4;
constexpr int64_t kWeights = 600'000;  // 2.4 MB: three chunks
constexpr auto kCallDeadline = 8s;     // every call, so a hung gateway fails the test
constexpr const char* kToken = "s3cret-token";
constexpr const char* kVersion = "9.9.9-test";

buffer::UnrollSpec cartpole_spec() {
  buffer::UnrollSpec spec;
  spec.T = 16;
  spec.K = 32;
  spec.obs_shape = {4};
  return spec;
}

v1::PluginIdentity job_plugin() {
  v1::PluginIdentity plugin;
  plugin.set_file_name("libcorridor.so");
  plugin.set_abi_version(1);
  plugin.set_sha256(std::string(64, 'a'));
  return plugin;
}

// The job's token (`token`: another, "" none) and the session, "" for none.
void authorise(grpc::ClientContext& context, const std::string& session,
               const std::string& token = kToken) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  if (!session.empty()) context.AddMetadata(kSessionMetadata, session);
  context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
}

// Unroll `sequence`: slot bytes derived from it, so a mixed-up slot shows.
v1::UnrollMessage unroll(uint64_t sequence, size_t bytes, uint64_t policy_version = 1) {
  std::string slot(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) slot[i] = static_cast<char>((sequence * 131 + i * 7) & 0xff);
  v1::UnrollMessage m;
  m.set_sequence(sequence);
  m.set_policy_version(policy_version);
  m.set_checksum(crc32_of(slot.data(), slot.size()));
  m.set_episodes(static_cast<uint32_t>(sequence % 5));
  m.set_actor(3);
  m.set_env_us(100 + static_cast<uint32_t>(sequence));
  m.set_policy_us(200);
  m.set_wait_us(300);
  m.set_processes_alive(2);
  m.set_slot(std::move(slot));
  return m;
}

// A node's StreamUnrolls: a thread reads every reply and adds it up.
class UnrollClient {
 public:
  UnrollClient(v1::ActorGateway::Stub& stub, const std::string& session) {
    authorise(context_, session);
    stream_ = stub.StreamUnrolls(&context_);
    reader_ = std::thread([this] {
      v1::UnrollReply reply;
      while (stream_->Read(&reply)) {
        std::lock_guard lock(mutex_);
        replies_.push_back(reply);
        credits_ += reply.credits();
        acked_ = reply.acked();
        changed_.notify_all();
      }
      std::lock_guard lock(mutex_);
      ended_ = true;
      changed_.notify_all();
    });
  }
  ~UnrollClient() {
    if (finished_) return;
    context_.TryCancel();
    reader_.join();
    stream_->Finish();
  }

  bool send(const v1::UnrollMessage& message) { return stream_->Write(message); }
  // Waits up to `wait` for `done` (over the replies so far), true when it held.
  bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds wait = 5s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, wait, done);
  }
  bool wait_credits(uint64_t total) {
    return wait_for([&] { return credits_ >= total; });
  }
  // The stream's status once the gateway ends it (`half_close`: the node
  // says it has sent everything first).
  grpc::Status finish(bool half_close = false) {
    if (half_close) stream_->WritesDone();
    reader_.join();
    finished_ = true;
    return stream_->Finish();
  }

  uint64_t credits() {
    std::lock_guard lock(mutex_);
    return credits_;
  }
  uint64_t acked() {
    std::lock_guard lock(mutex_);
    return acked_;
  }
  std::vector<v1::UnrollReply> replies() {
    std::lock_guard lock(mutex_);
    return replies_;
  }

  // Read under wait_for's predicate only.
  uint64_t credits_ = 0, acked_ = 0;
  bool ended_ = false;
  std::vector<v1::UnrollReply> replies_;

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UnrollMessage, v1::UnrollReply>> stream_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::thread reader_;
  bool finished_ = false;
};

// One version of the weights as StreamWeights delivered it.
struct ReceivedVersion {
  uint64_t version = 0;
  std::string bytes;
  uint32_t checksum = 0;
  size_t chunks = 0;
  size_t largest_chunk = 0;
};

class GatewayTest : public ::testing::Test {
 protected:
  GatewayTest()
      : ring_(
            buffer::Ring::create(buffer::testing::unique_name("gw-ring"), cartpole_spec(), kSlots)),
        slab_(buffer::WeightSlab::create(buffer::testing::unique_name("gw-slab"), kWeights)) {
    publish(0.5f);
    GatewayOptions o;
    o.address = "127.0.0.1:0";
    o.token = kToken;
    o.config_toml = "[env]\nname = \"cartpole\"\n";
    o.job_id = "job-17";
    o.incarnation = "incarnation-1";
    o.version = kVersion;
    o.spec_hash = buffer::spec_hash(cartpole_spec());
    o.plugin = job_plugin();
    o.credits = kCredits;
    o.default_processes = 1;
    gateway_ = std::make_unique<ActorGateway>(o, *ring_, *slab_);
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(weights_message_limit());
    stub_ = v1::ActorGateway::NewStub(
        grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(gateway_->port()),
                                  grpc::InsecureChannelCredentials(), arguments));
  }

  uint64_t publish(float base) {
    std::vector<float> weights(kWeights);
    for (int64_t i = 0; i < kWeights; ++i) weights[i] = base + static_cast<float>(i);
    return slab_->publish(weights.data());
  }
  std::string slab_bytes() {
    std::string bytes(kWeights * sizeof(float), '\0');
    slab_->read(reinterpret_cast<float*>(bytes.data()));
    return bytes;
  }
  size_t slot_bytes() const { return ring_->layout().bytes; }

  grpc::Status join(v1::JoinReply& reply, const std::string& node = "node-a",
                    const std::function<void(v1::JoinRequest&)>& edit = {},
                    const std::string& token = kToken) {
    v1::JoinRequest request;
    request.set_node_name(node);
    request.set_version(kVersion);
    request.set_processes(3);
    if (edit) edit(request);
    grpc::ClientContext context;
    authorise(context, "", token);
    return stub_->Join(&context, request, &reply);
  }
  std::string join_session(const std::string& node = "node-a") {
    v1::JoinReply reply;
    const grpc::Status status = join(reply, node);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return reply.session();
  }

  // Fills every FREE slot from the test (claimed, committed, not taken);
  // returns how many it took.
  uint32_t fill_free_slots() {
    uint32_t filled = 0;
    while (auto slot = ring_->claim(0ms)) {
      ring_->commit(*slot, {.policy_version = 1});
      ++filled;
    }
    return filled;
  }
  // Fills slots as they come FREE until `expected` are filled or 2 s pass
  // (a stream's slots go back once the gateway is done with the call, a
  // moment after the client saw it end); returns how many it filled.
  uint32_t fill_freed_slots(uint32_t expected) {
    uint32_t filled = 0;
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (filled < expected && std::chrono::steady_clock::now() < deadline) {
      filled += fill_free_slots();
      std::this_thread::sleep_for(5ms);
    }
    std::this_thread::sleep_for(100ms);  // and no more than that
    return filled + fill_free_slots();
  }
  // Takes and releases `count` READY unrolls, one at a time.
  void drain(uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      auto taken = ring_->take(1, 1, 1000, 2s);
      ASSERT_TRUE(taken) << "unroll " << i << " of " << count << " never became READY";
      ring_->release(*taken);
    }
  }

  // Reads chunks up to the end of one version; nothing when the stream ends.
  static std::optional<ReceivedVersion> read_version(grpc::ClientReader<v1::WeightsChunk>& stream) {
    ReceivedVersion got;
    v1::WeightsChunk chunk;
    while (stream.Read(&chunk)) {
      if (chunk.offset() == 0) got = {chunk.version(), "", chunk.checksum(), 0, 0};
      EXPECT_EQ(chunk.version(), got.version);
      EXPECT_EQ(chunk.offset(), got.bytes.size()) << "chunks out of order";
      EXPECT_EQ(chunk.checksum(), got.checksum);
      got.bytes += chunk.data();
      ++got.chunks;
      got.largest_chunk = std::max(got.largest_chunk, chunk.data().size());
      if (got.bytes.size() >= chunk.total_bytes()) return got;
    }
    return std::nullopt;
  }

  std::unique_ptr<buffer::Ring> ring_;
  std::unique_ptr<buffer::WeightSlab> slab_;
  std::unique_ptr<ActorGateway> gateway_;
  std::unique_ptr<v1::ActorGateway::Stub> stub_;
};

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
    UnrollClient client(*stub_, join_session());
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

// A node's StreamWeights.
struct WeightsClient {
  WeightsClient(v1::ActorGateway::Stub& stub, const std::string& session) {
    authorise(context, session);
    stream = stub.StreamWeights(&context, v1::StreamWeightsRequest());
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WeightsChunk>> stream;
};

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
}  // namespace pronghorn::remote
