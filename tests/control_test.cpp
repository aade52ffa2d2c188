// The control plane over a real gRPC connection to a real `pronghorn train`
// on loopback: status moves, scaling changes the live actor processes, the
// token guards every mutating call, bad requests get the right code while the
// server keeps serving, TLS (mutual) round trip, and a curl scrape of /metrics.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "proto/pronghorn.grpc.pb.h"
#include "tests/testing/control_job.h"
#include "tests/testing/health_check.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn;
using namespace pronghorn::testing;
using grpc::StatusCode;

TEST(ControlTest, StatusFieldsMoveWhileTraining) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  const v1::Status first = get_status(*stub);
  EXPECT_EQ(first.run_name(), job.name);
  EXPECT_EQ(first.env_name(), "cartpole");
  EXPECT_EQ(first.run_dir(), std::filesystem::absolute(job.dir).string());
  EXPECT_EQ(first.ring_slots(), 16u);
  EXPECT_EQ(first.actors_desired(), 1u);
  EXPECT_EQ(first.config_digest().size(), 16u);
  EXPECT_FALSE(first.stopping());
  ASSERT_TRUE(wait_for([&] {
    const v1::Status s = get_status(*stub);
    return s.env_steps() > first.env_steps() && s.policy_version() > first.policy_version() &&
           s.uptime_s() > first.uptime_s() && s.unrolls_consumed() > first.unrolls_consumed() &&
           s.episodes() > first.episodes() && s.sps() > 0 && s.learner_steps_per_s() > 0 &&
           s.episode_return().count() > 0 && s.episode_length_mean() > 0 &&
           s.stage_time().actor_env_s() > first.stage_time().actor_env_s() &&
           s.stage_time().learner_forward_s() > first.stage_time().learner_forward_s();
  })) << "status moves with training";

  // The stream sends the same Status, newer each time.
  v1::WatchStatusRequest watch;
  watch.set_interval_s(0.1);
  auto c = context();
  auto reader = stub->WatchStatus(c.get(), watch);
  std::vector<v1::Status> seen(4);
  for (auto& s : seen) ASSERT_TRUE(reader->Read(&s));
  c->TryCancel();
  EXPECT_GT(seen.back().env_steps(), seen.front().env_steps());
  EXPECT_GT(seen.back().uptime_s(), seen.front().uptime_s() + 0.2);

  // The CLI: table, JSON with the metrics.jsonl keys, and the job found by its run dir.
  auto [code, out] = shell(std::string(PRONGHORN_BIN) + " status --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("env steps"), std::string::npos) << out;
  EXPECT_NE(out.find(job.name), std::string::npos) << out;
  std::tie(code, out) =
      shell(std::string(PRONGHORN_BIN) + " status --json --target " + job.address);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\"episode_return_mean\": "), std::string::npos) << out;
}

TEST(ControlTest, ScalingUpAndDownChangesTheLiveActorProcesses) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  ASSERT_EQ(children_of(job.pid).size(), 1u);
  v1::ScaleActorsRequest request;
  request.set_count(3);
  v1::ScaleActorsReply reply;
  grpc::Status rpc = stub->ScaleActors(context(job.token).get(), request, &reply);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(reply.previous(), 1u);
  EXPECT_EQ(reply.desired(), 3u);
  EXPECT_TRUE(wait_for([&] { return children_of(job.pid).size() == 3; }));
  EXPECT_TRUE(wait_for([&] { return get_status(*stub).actors_alive() == 3; }));
  const uint64_t committed = get_status(*stub).unrolls_committed();
  EXPECT_TRUE(wait_for([&] { return get_status(*stub).unrolls_committed() > committed + 50; }));

  // Down through the CLI, with the token it finds in the run directory.
  auto [code, out] =
      shell(std::string(PRONGHORN_BIN) + " scale --actors 1 --target " + job.address);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("3 → 1"), std::string::npos) << out;
  EXPECT_TRUE(wait_for([&] { return children_of(job.pid).size() == 1; }));
  EXPECT_TRUE(wait_for([&] { return get_status(*stub).actors_alive() == 1; }));
  EXPECT_EQ(get_status(*stub).actor_restarts(), 0u) << "retired actors are not restarted";
  const uint64_t steps = get_status(*stub).env_steps();
  EXPECT_TRUE(wait_for([&] { return get_status(*stub).env_steps() > steps; }))
      << "training goes on";

  // Nothing lost: every committed unroll was consumed, dropped or still waits.
  v1::StopReply stopped;
  v1::StopRequest stop;
  stop.set_graceful(true);
  rpc = stub->Stop(context(job.token).get(), stop, &stopped);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
  std::ifstream in(job.dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  auto value = [&](const std::string& key) {
    return std::stod(last.substr(last.find("\"" + key + "\": ") + key.size() + 4));
  };
  EXPECT_EQ(value("unrolls_committed"),
            value("unrolls_consumed") + value("unrolls_dropped_stale") + value("ring_occupancy"));
}

TEST(ControlTest, MutatingCallsWithoutTheRightTokenAreRefusedAndChangeNothing) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  for (const std::string& token : {std::string(), std::string("wrong-token"), job.token + "x"}) {
    const StatusCode expected =
        token.empty() ? StatusCode::UNAUTHENTICATED : StatusCode::PERMISSION_DENIED;
    v1::ScaleActorsRequest scale;
    scale.set_count(2);
    v1::ScaleActorsReply scaled;
    EXPECT_EQ(stub->ScaleActors(context(token).get(), scale, &scaled).error_code(), expected);
    v1::SaveCheckpointReply saved;
    EXPECT_EQ(stub->SaveCheckpoint(context(token).get(), {}, &saved).error_code(), expected);
    v1::StopRequest stop;
    stop.set_graceful(true);
    v1::StopReply stopped;
    EXPECT_EQ(stub->Stop(context(token).get(), stop, &stopped).error_code(), expected);
  }
  // The CLI with a wrong token: one line, exit 1.
  auto [code, out] =
      shell(std::string(PRONGHORN_BIN) + " stop --token nope --target " + job.address);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("wrong token"), std::string::npos) << out;

  std::this_thread::sleep_for(300ms);
  const v1::Status s = get_status(*stub);
  EXPECT_EQ(s.actors_desired(), 1u);
  EXPECT_EQ(children_of(job.pid).size(), 1u);
  EXPECT_FALSE(s.stopping());
  EXPECT_TRUE(s.last_checkpoint_path().empty());
  EXPECT_FALSE(std::filesystem::exists(job.dir + "/checkpoints")) << "no checkpoint was written";
  EXPECT_EQ(kill(job.pid, 0), 0) << "the job still runs";
}

TEST(ControlTest, BadRequestsGetTheRightCodeAndTheServerKeepsServing) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  for (int count : {-1, -1000000, 1025, 2000000000}) {
    v1::ScaleActorsRequest scale;
    scale.set_count(count);
    v1::ScaleActorsReply reply;
    grpc::Status rpc = stub->ScaleActors(context(job.token).get(), scale, &reply);
    EXPECT_EQ(rpc.error_code(), StatusCode::INVALID_ARGUMENT) << count;
    EXPECT_NE(rpc.error_message().find("count = " + std::to_string(count)), std::string::npos)
        << rpc.error_message();
  }
  for (double interval : {-1.0, 0.001, 1e9, std::nan("")}) {
    v1::WatchStatusRequest watch;
    watch.set_interval_s(interval);
    auto c = context();
    auto reader = stub->WatchStatus(c.get(), watch);
    v1::Status s;
    EXPECT_FALSE(reader->Read(&s));
    EXPECT_EQ(reader->Finish().error_code(), StatusCode::INVALID_ARGUMENT) << interval;
  }
  // Bytes that parse as no request, to every method, and a request over the size limit.
  grpc::GenericStub generic(grpc::CreateChannel(job.address, grpc::InsecureChannelCredentials()));
  auto raw_call = [&](const std::string& method, const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    auto c = context(job.token);
    std::promise<grpc::Status> done;
    generic.UnaryCall(c.get(), "/pronghorn.v1.Learner/" + method, {}, &request, &response,
                      [&](const grpc::Status& s) { done.set_value(s); });
    return done.get_future().get();
  };
  // WatchStatus streams: its one request written, then the status it ends with.
  auto raw_stream = [&](const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    auto c = context(job.token);
    grpc::CompletionQueue queue;
    auto call = generic.PrepareCall(c.get(), "/pronghorn.v1.Learner/WatchStatus", &queue);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    queue.Next(&tag, &ok);
    call->WriteLast(request, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    queue.Next(&tag, &ok);
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(3));
    while (queue.Next(&tag, &ok) && tag != reinterpret_cast<void*>(3)) {
    }
    queue.Shutdown();
    while (queue.Next(&tag, &ok)) {
    }
    return status;
  };
  const std::string truncated_varint("\x08\xff\xff\xff", 4);  // parses as no message
  for (const char* method : {"GetStatus", "ScaleActors", "SaveCheckpoint", "Stop"}) {
    const grpc::Status rpc = raw_call(method, truncated_varint);
    EXPECT_EQ(rpc.error_code(), StatusCode::INVALID_ARGUMENT)
        << method << ": " << rpc.error_code() << " " << rpc.error_message();
    EXPECT_NE(rpc.error_message().find("do not parse"), std::string::npos)
        << method << ": " << rpc.error_message();
  }
  const grpc::Status watch_rpc = raw_stream(truncated_varint);
  EXPECT_EQ(watch_rpc.error_code(), StatusCode::INVALID_ARGUMENT)
      << "WatchStatus: " << watch_rpc.error_code() << " " << watch_rpc.error_message();
  EXPECT_EQ(raw_call("ScaleActors", std::string(100 * 1024, '\x08')).error_code(),
            StatusCode::RESOURCE_EXHAUSTED);

  const v1::Status s = get_status(*stub);
  EXPECT_EQ(s.actors_desired(), 1u) << "no bad request changed anything";
  const uint64_t steps = s.env_steps();
  EXPECT_TRUE(wait_for([&] { return get_status(*stub).env_steps() > steps; }))
      << "the server keeps serving and the job keeps training";
}

TEST(ControlTest, SaveCheckpointAndGracefulStop) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  v1::SaveCheckpointReply saved;
  grpc::Status rpc = stub->SaveCheckpoint(context(job.token).get(), {}, &saved);
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  EXPECT_TRUE(std::filesystem::exists(saved.path())) << saved.path();
  EXPECT_EQ(get_status(*stub).last_checkpoint_path(), saved.path());

  auto [code, out] = shell(std::string(PRONGHORN_BIN) + " stop --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  // "stopped (run NAME, DIR); checkpoint PATH": which job, and its last checkpoint.
  const std::string named = "stopped (run " + job.name + ", ";
  ASSERT_EQ(out.rfind(named, 0), 0u) << out;
  const std::string prefix = "; checkpoint ";
  const size_t at = out.find(prefix);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string final_path =
      out.substr(at + prefix.size(), out.find('\n') - at - prefix.size());
  EXPECT_TRUE(std::filesystem::exists(final_path)) << final_path;
  EXPECT_NE(final_path, saved.path());
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
  EXPECT_TRUE(leftover_segments(job.name).empty());

  // The run directory says how the job ended, without a learner to ask.
  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + " status --run-dir " + job.dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("\nstate          ended, exit 0: stopped after "), std::string::npos) << out;
  // Nothing listens at its address now: one line, exit 1.
  std::tie(code, out) = shell(std::string(PRONGHORN_BIN) + " status --target " + job.address);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("cannot reach the learner at " + job.address), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

// The standard health service a scheduler probes: SERVING without a token,
// an unknown service NOT_FOUND; gone with the job.
TEST(ControlTest, HealthServiceAnswersProbesWithoutAToken) {
  Job job;
  ASSERT_TRUE(wait_for([&] { return get_status(*job.stub()).learner_steps() > 0; }));
  const HealthAnswer serving = health_check(job.address);
  EXPECT_EQ(serving.code, grpc::StatusCode::OK);
  EXPECT_EQ(serving.serving_status, 1) << "SERVING";
  EXPECT_EQ(health_check(job.address, "pronghorn.v1.Nothing").code, grpc::StatusCode::NOT_FOUND);
  kill(job.pid, SIGTERM);
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
  EXPECT_EQ(health_check(job.address).code, grpc::StatusCode::UNAVAILABLE);
}

TEST(ControlTest, MetricsScrapeWithCurl) {
  Job job;
  auto stub = job.stub();
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  const uint32_t port = get_status(*stub).metrics_port();
  ASSERT_GT(port, 0u);
  auto [code, out] = shell("curl -sf http://127.0.0.1:" + std::to_string(port) + "/metrics");
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("# TYPE pronghorn_env_steps_total counter"), std::string::npos) << out;
  EXPECT_NE(out.find("# TYPE pronghorn_ring_occupancy_slots gauge"), std::string::npos) << out;
  EXPECT_NE(out.find("pronghorn_actors_alive 1"), std::string::npos) << out;
  EXPECT_NE(out.find("pronghorn_info{run=\"" + job.name + "\""), std::string::npos) << out;
  EXPECT_NE(out.find("pronghorn_stage_seconds_total{stage=\"actor_env\"}"), std::string::npos)
      << out;
  const size_t at = out.find("\npronghorn_env_steps_total ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_GT(std::stod(out.substr(at + 27)), 0);
  std::tie(code, out) =
      shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + std::to_string(port) +
            "/nothing");
  EXPECT_EQ(out, "404");
}

// A network namespace of the test's own with a veth pair, one end at
// 10.213.7.1: a non-loopback address whose traffic never leaves the namespace.
struct NetworkNamespace {
  std::string name = "pronghorn-test-" + std::to_string(getpid());
  std::string ip = std::filesystem::exists("/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip";
  bool ready = false;
  NetworkNamespace() {
    const std::string in = ip + " netns exec " + name + " " + ip;
    auto [code, out] = shell(ip + " netns add " + name + " && " + in +
                             " link add pga type veth peer name pgb && " + in +
                             " addr add 10.213.7.1/24 dev pga && " + in + " link set pga up && " +
                             in + " link set pgb up && " + in + " link set lo up");
    ready = code == 0;
    EXPECT_TRUE(ready) << out;
  }
  ~NetworkNamespace() { shell(ip + " netns del " + name); }
  // `command` run inside the namespace.
  std::string exec(const std::string& command) const {
    return ip + " netns exec " + name + " " + command;
  }
};

TEST(ControlTest, OffLoopbackStatusCallsNeedTheTokenToo) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  NetworkNamespace ns;
  ASSERT_TRUE(ns.ready);
  const std::string dir = ::testing::TempDir() + "/control-test-netns-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string token_file = dir + "/job.token";
  std::ofstream(token_file) << "netns-test-token\n";
  std::filesystem::permissions(
      token_file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const pid_t pid =
      spawn(ns.ip, {"netns", "exec", ns.name, PRONGHORN_BIN, "--log-level", "warn", "train",
                    "--run-dir", dir + "/run", "--set", "run.target_return=0", "--set",
                    "actor.count=1", "--set", "server.address=10.213.7.1:0", "--set",
                    "server.token_file=" + token_file, "--set", "server.metrics_port=-1"});
  StopOnExit guard{pid};
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(dir + "/run/server.address"); }));
  std::string address;
  std::ifstream(dir + "/run/server.address") >> address;
  EXPECT_EQ(address.rfind("10.213.7.1:", 0), 0u) << address;
  const std::string status = ns.exec(std::string(PRONGHORN_BIN) + " status --target " + address);

  auto [code, out] = shell(status);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("needs the job's token"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/run/token")) << "server.token_file is the token";
  std::tie(code, out) = shell(status + " --token-file " + token_file);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("env steps"), std::string::npos) << out;

  kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 0);
  guard.pid = -1;
}

}  // namespace
