// The fixture of the actor gateway's tests (remote/gateway_*_test.cpp): in
// one process a real ring and slab, the gateway on loopback, and a raw gRPC
// client speaking proto/remote.proto the way a node does. Every client wait
// has a deadline.
#pragma once

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

namespace pronghorn::remote::testing {

using namespace std::chrono_literals;

inline constexpr uint32_t kSlots = 8;
inline constexpr uint32_t kCredits = 4;
inline constexpr int64_t kWeights = 600'000;  // 2.4 MB: three chunks
inline constexpr auto kCallDeadline = 8s;     // every call, so a hung gateway fails the test
inline constexpr const char* kToken = "s3cret-token";
inline constexpr const char* kVersion = "9.9.9-test";

inline buffer::UnrollSpec cartpole_spec() {
  buffer::UnrollSpec spec;
  spec.T = 16;
  spec.K = 32;
  spec.obs_shape = {4};
  return spec;
}

inline v1::PluginIdentity job_plugin() {
  v1::PluginIdentity plugin;
  plugin.set_file_name("libcorridor.so");
  plugin.set_abi_version(1);
  plugin.set_sha256(std::string(64, 'a'));
  return plugin;
}

// The job's token (`token`: another, "" none) and the session, "" for none.
inline void authorise(grpc::ClientContext& context, const std::string& session,
                      const std::string& token = kToken) {
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  if (!session.empty()) context.AddMetadata(kSessionMetadata, session);
  context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
}

// Unroll `sequence`: slot bytes derived from it, so a mixed-up slot shows.
inline v1::UnrollMessage unroll(uint64_t sequence, size_t bytes, uint64_t policy_version = 1) {
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
  m.set_waiting(kCredits);  // a busy node: its window stays full
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

}  // namespace pronghorn::remote::testing
