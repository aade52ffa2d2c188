// A whole actor node (remote/actor_node.h) against a fake learner's gateway
// in this process on a loopback port: it joins, takes the job's config,
// starts real actor processes once the first weights are in, streams their
// unrolls one per credit, and leaves 0 when told the job ended, leaving no
// shared memory behind. The network tests of a real learner and node are
// tests/remote_test.cpp.
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "actor/job_check.h"
#include "buffer/unroll_spec.h"
#include "core/error.h"
#include "model/policy.h"
#include "proto/remote.grpc.pb.h"
#include "remote/actor_node.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using namespace std::chrono_literals;

// Our shared-memory segments whose run part names `run`.
std::set<std::string> segments_of(const std::string& run) {
  std::set<std::string> found;
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.starts_with("pronghorn.") && name.ends_with("." + run)) found.insert(name);
  }
  closedir(dir);
  return found;
}

// The node's log while it lives.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    spdlog::default_logger()->sinks().push_back(sink_);
  }
  ~CapturedLog() {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  std::string text() const { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

// The node's tally line: {committed, acked, lost, discarded, unsent}; it must add up.
std::vector<uint64_t> tally_of(const std::string& log) {
  const std::regex line(
      R"(unrolls committed (\d+) = acked (\d+) \+ lost in flight (\d+) \+ discarded (\d+) \+ )"
      R"(unsent (\d+))");
  std::smatch m;
  if (!std::regex_search(log, m, line)) return {};
  std::vector<uint64_t> n;
  for (size_t i = 1; i <= 5; ++i) n.push_back(std::stoull(m[i].str()));
  EXPECT_EQ(n[0], n[1] + n[2] + n[3] + n[4]) << m[0];
  return n;
}

class FakeLearner final : public v1::ActorGateway::Service {
 public:
  explicit FakeLearner(Config config) : config_(std::move(config)) {
    const EnvSpec env = actor::check_job_config(config_);
    spec_ = buffer::unroll_spec_for(env, config_.actor.unroll_length, config_.env.num_envs);
    PolicyNet model(model_spec_for(env, config_.model));
    params_.resize(model->parameter_count());
    model->write_flat(params_.data());
  }

  uint32_t until = 6;          // unrolls taken before the job ends
  uint32_t cut_after = 0;      // the first session's stream fails after this many (0: never)
  bool acks_at_close = false;  // no acks until the node half-closes, then one for all
  std::mutex mutex;
  std::vector<v1::UnrollMessage> got;
  std::vector<v1::JoinRequest> joins;

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinReply* reply) override {
    const auto auth = context->client_metadata().find("authorization");
    if (auth == context->client_metadata().end() ||
        std::string(auth->second.data(), auth->second.size()) != "Bearer secret") {
      return {grpc::StatusCode::PERMISSION_DENIED, "wrong token"};
    }
    std::lock_guard lock(mutex);
    joins.push_back(*request);
    reply->set_config_toml(to_toml(config_));
    reply->set_session("s" + std::to_string(joins.size()));
    reply->set_job_id("job-1");
    reply->set_incarnation("inc-1");
    reply->set_slot_bytes(buffer::slot_layout(spec_).bytes);
    reply->set_spec_hash(buffer::spec_hash(spec_));
    reply->set_policy_version(1);
    reply->set_processes(1);
    // What the learner knows of the session cut: all it took landed.
    reply->set_previous_session_received(request->previous_session() == "s1" ? cut_after : -1);
    return grpc::Status::OK;
  }

  grpc::Status StreamWeights(grpc::ServerContext* context, const v1::StreamWeightsRequest*,
                             grpc::ServerWriter<v1::WeightsChunk>* writer) override {
    const uint64_t total = params_.size() * sizeof(float);
    v1::WeightsChunk c;
    c.set_version(1);
    c.set_total_bytes(total);
    c.set_checksum(crc32_of(params_.data(), total));
    for (uint64_t offset = 0; offset < total; offset += kWeightChunkBytes) {
      c.set_offset(offset);
      c.set_data(reinterpret_cast<const char*>(params_.data()) + offset,
                 std::min<uint64_t>(kWeightChunkBytes, total - offset));
      writer->Write(c);
    }
    while (!context->IsCancelled() && !ended_) std::this_thread::sleep_for(5ms);
    return grpc::Status::OK;
  }

  grpc::Status StreamUnrolls(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::UnrollReply, v1::UnrollMessage>* stream) override {
    v1::UnrollReply reply;
    reply.set_credits(2);
    reply.set_processes(1);
    stream->Write(reply);
    v1::UnrollMessage m;
    uint64_t last = 0;
    for (;;) {
      {
        std::lock_guard lock(mutex);
        if (got.size() >= until) break;
      }
      if (!stream->Read(&m)) {  // the node half-closed: it is stopping
        if (acks_at_close) {
          reply.set_acked(last);
          reply.set_credits(0);
          stream->Write(reply);
        }
        return grpc::Status::OK;
      }
      std::lock_guard lock(mutex);
      got.push_back(m);
      last = m.sequence();
      if (joins.size() == 1 && got.size() == cut_after) {
        return {grpc::StatusCode::UNAVAILABLE, "cut"};  // no ack for the last
      }
      reply.set_acked(acks_at_close ? 0 : m.sequence());
      reply.set_credits(1);
      stream->Write(reply);
    }
    reply.set_credits(0);
    reply.set_job_ended(true);
    stream->Write(reply);
    ended_ = true;
    return grpc::Status::OK;
  }

 private:
  Config config_;
  buffer::UnrollSpec spec_;
  std::vector<float> params_;
  std::atomic<bool> ended_{false};
};

struct Served {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

Served serve(FakeLearner& learner) {
  Served s;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &s.port);
  builder.RegisterService(&learner);
  s.server = builder.BuildAndStart();
  return s;
}

NodeOptions options_for(int port, const std::string& name) {
  NodeOptions o;
  o.learner = "127.0.0.1:" + std::to_string(port);
  o.token = "secret";
  o.name = name;
  o.processes = 1;
  o.give_up_after_s = 20;
  o.program = PRONGHORN_BIN;
  o.version = "test";
  return o;
}

Config small_job() {
  Config c;
  c.env.num_envs = 2;
  c.actor.unroll_length = 4;
  c.learner.ring_slots = 8;
  return c;
}

TEST(ActorNodeTest, StreamsItsActorsUnrollsUntilTheJobEndsAndLeavesNothingBehind) {
  FakeLearner learner(small_job());
  Served served = serve(learner);
  const std::string name = "node-run-test-" + std::to_string(getpid());
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  CapturedLog log;
  const NodeExit exit = run_actor_node(options_for(served.port, name), stop);
  const auto tally = tally_of(log.text());
  ASSERT_EQ(tally.size(), 5u) << log.text();
  EXPECT_EQ(tally[1], 6u) << "acked: what the learner took";
  EXPECT_LE(tally[2], 2u) << "lost: at most the credits held at the end";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
  EXPECT_EQ(exit.code, 0) << exit.line;
  EXPECT_NE(exit.line.find("ended"), std::string::npos) << exit.line;
  std::lock_guard lock(learner.mutex);
  ASSERT_EQ(learner.joins.size(), 1u);
  EXPECT_EQ(learner.joins[0].node_name(), name);
  EXPECT_EQ(learner.joins[0].processes(), 1u);
  ASSERT_EQ(learner.got.size(), 6u);
  for (size_t i = 0; i < learner.got.size(); ++i) {
    const v1::UnrollMessage& m = learner.got[i];
    EXPECT_EQ(m.sequence(), i + 1);
    EXPECT_EQ(m.policy_version(), 1u) << "the learner's version";
    EXPECT_EQ(m.checksum(), crc32_of(m.slot().data(), m.slot().size()));
    EXPECT_EQ(m.actor(), 0u);
  }
  EXPECT_EQ(segments_of("node-" + name), std::set<std::string>{}) << "ring and slab removed";
  served.server->Shutdown(std::chrono::system_clock::now() + 1s);
}

TEST(ActorNodeTest, RejoinsAfterACutWithItsPreviousSessionAndStartsItsSequenceOver) {
  FakeLearner learner(small_job());
  learner.cut_after = 3;
  Served served = serve(learner);
  const std::string name = "node-run-cut-" + std::to_string(getpid());
  std::atomic<bool> stop{false};
  CapturedLog log;
  const NodeExit exit = run_actor_node(options_for(served.port, name), stop);
  EXPECT_EQ(exit.code, 0) << exit.line;
  const auto tally = tally_of(log.text());
  ASSERT_EQ(tally.size(), 5u) << log.text();
  EXPECT_EQ(tally[1], 6u) << "acked: 3 told by the rejoin, 3 acked";
  EXPECT_NE(log.text().find("ended (cut"), std::string::npos) << log.text();
  std::lock_guard lock(learner.mutex);
  ASSERT_EQ(learner.joins.size(), 2u);
  EXPECT_EQ(learner.joins[0].previous_session(), "");
  EXPECT_EQ(learner.joins[1].previous_session(), "s1");
  ASSERT_EQ(learner.got.size(), 6u);
  const uint64_t sequences[] = {1, 2, 3, 1, 2, 3};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(learner.got[i].sequence(), sequences[i]) << i;
  EXPECT_EQ(segments_of("node-" + name), std::set<std::string>{});
  served.server->Shutdown(std::chrono::system_clock::now() + 1s);
}

TEST(ActorNodeTest, AStopWaitsForTheLearnersLastAckSoNothingSentCountsAsLost) {
  FakeLearner learner(small_job());
  learner.until = 1'000'000;
  learner.acks_at_close = true;
  Served served = serve(learner);
  const std::string name = "node-run-stop-" + std::to_string(getpid());
  std::atomic<bool> stop{false};
  std::thread stopper([&] {  // SIGTERM, once some unrolls are out
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(learner.mutex);
        if (learner.got.size() >= 4) break;
      }
      std::this_thread::sleep_for(5ms);
    }
    stop = true;
  });
  CapturedLog log;
  const NodeExit exit = run_actor_node(options_for(served.port, name), stop);
  stopper.join();
  EXPECT_EQ(exit.code, 0) << exit.line;
  EXPECT_NE(exit.line.find("stopped"), std::string::npos) << exit.line;
  const auto tally = tally_of(log.text());
  ASSERT_EQ(tally.size(), 5u) << log.text();
  std::lock_guard lock(learner.mutex);
  EXPECT_GE(learner.got.size(), 4u);
  EXPECT_EQ(tally[1], learner.got.size()) << "acked: all the learner committed, told at the close";
  EXPECT_EQ(tally[2], 0u) << "lost in flight";
  EXPECT_EQ(segments_of("node-" + name), std::set<std::string>{});
  served.server->Shutdown(std::chrono::system_clock::now() + 1s);
}

TEST(ActorNodeTest, AWrongTokenIsRefusedOnceWithTheLearnersMessage) {
  FakeLearner learner(small_job());
  Served served = serve(learner);
  NodeOptions o = options_for(served.port, "node-run-refused");
  o.token = "wrong";
  std::atomic<bool> stop{false};
  CapturedLog log;
  try {
    run_actor_node(o, stop);
    FAIL() << "a refused node ran";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("refused this node: wrong token"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(log.text().find("unrolls committed"), std::string::npos)
      << "a node refused before it ran has no tally to tell: " << log.text();
  served.server->Shutdown(std::chrono::system_clock::now() + 1s);
}

}  // namespace
}  // namespace pronghorn::remote
