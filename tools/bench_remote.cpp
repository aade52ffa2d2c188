// `pronghorn bench remote`: unrolls/s and env steps/s from an actor-only node
// to the learner's ring through the actor gateway (remote/actor_gateway.h)
// on loopback, for a CartPole slot and a Pong pixel slot, against two
// baselines measured in the same run:
//   local ring  a producer thread claims, memcpys the slot, commits; the
//               consumer takes and releases (what a local actor costs)
//   raw gRPC    one bidi stream of the same bytes to a server of our own
//               that reads and drops them: no ring, no checksum, no credits
//   gateway     Join, StreamUnrolls sending one unroll per credit (CRC-32 of
//               every unroll), a consumer thread taking and releasing
// Wire bytes per env step: the serialised message, gRPC's 5-byte prefix and
// HTTP/2's 9-byte header per 16 KiB DATA frame (no TLS), over T·K env steps.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "core/error.h"
#include "proto/remote.grpc.pb.h"
#include "remote/actor_gateway.h"
#include "remote/wire.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kSlots = 16;  // configs/pong.toml's ring_slots
constexpr const char* kToken = "bench-remote-token";
constexpr auto kWarmUp = 300ms;

struct RemoteBenchArgs {
  double seconds = 3.0;
  uint32_t credits = 4;  // remote.credits
};

// Unrolls per second the consumer counted over `seconds` after a warm-up.
class Window {
 public:
  explicit Window(double seconds) : seconds_(seconds) {}
  double measure(const std::atomic<uint64_t>& count) {
    std::this_thread::sleep_for(kWarmUp);
    const uint64_t before = count.load();
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
    const uint64_t after = count.load();
    return (after - before) / std::chrono::duration<double>(Clock::now() - start).count();
  }

 private:
  double seconds_;
};

// Takes and releases unrolls one at a time until `stop`, counting them.
std::thread consumer(buffer::Ring& ring, std::atomic<bool>& stop, std::atomic<uint64_t>& taken) {
  return std::thread([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      auto got = ring.take(1, 0, ~uint64_t{0} >> 1, 100ms);
      if (!got) continue;
      ring.release(*got);
      taken.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

std::string segment(const std::string& what) {
  return fmt::format("/pronghorn-bench-remote-{}-{}", getpid(), what);
}

double local_ring(const buffer::UnrollSpec& spec, double seconds) {
  auto ring = buffer::Ring::create(segment("local"), spec, kSlots);
  const size_t bytes = ring->layout().bytes;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> taken{0};
  std::thread producer([&] {
    std::vector<uint8_t> unroll(bytes, 7);
    while (!stop.load(std::memory_order_relaxed)) {
      auto slot = ring->claim(100ms);
      if (!slot) continue;
      std::memcpy(ring->slot_data(*slot), unroll.data(), bytes);
      ring->commit(*slot, {});
    }
  });
  std::thread learner = consumer(*ring, stop, taken);
  const double rate = Window(seconds).measure(taken);
  stop = true;
  producer.join();
  learner.join();
  return rate;
}

// The raw baseline's server: StreamUnrolls that reads every message and
// drops it (its `slot` is the only field set: a one-field bytes message).
class RawSink final : public v1::ActorGateway::CallbackService {
 public:
  std::atomic<uint64_t> received{0};

  grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply>* StreamUnrolls(
      grpc::CallbackServerContext*) override {
    class Reader final : public grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply> {
     public:
      explicit Reader(std::atomic<uint64_t>& count) : count_(count) { StartRead(&in_); }
      void OnReadDone(bool ok) override {
        if (!ok) return Finish(grpc::Status::OK);
        count_.fetch_add(1, std::memory_order_relaxed);
        StartRead(&in_);
      }
      void OnDone() override { delete this; }

     private:
      std::atomic<uint64_t>& count_;
      v1::UnrollMessage in_;
    };
    return new Reader(received);
  }
};

std::shared_ptr<grpc::Channel> loopback_channel(int port, uint64_t slot_bytes) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(remote::unroll_message_limit(slot_bytes));
  arguments.SetMaxReceiveMessageSize(remote::weights_message_limit());
  remote::set_keepalive(arguments);
  return grpc::CreateCustomChannel(fmt::format("127.0.0.1:{}", port),
                                   grpc::InsecureChannelCredentials(), arguments);
}

double raw_grpc(uint64_t slot_bytes, double seconds) {
  RawSink sink;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&sink);
  builder.SetMaxReceiveMessageSize(remote::unroll_message_limit(slot_bytes));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  PRONGHORN_CHECK(server && port > 0, "bench remote: cannot listen on 127.0.0.1");
  auto stub = v1::ActorGateway::NewStub(loopback_channel(port, slot_bytes));
  v1::UnrollMessage message;
  message.set_slot(std::string(slot_bytes, '\7'));
  std::atomic<bool> stop{false};
  std::thread node([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 60s);
    auto stream = stub->StreamUnrolls(&context);
    while (!stop.load(std::memory_order_relaxed) && stream->Write(message)) {
    }
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    if (!status.ok()) std::cerr << "bench remote: raw stream: " << status.error_message() << "\n";
  });
  const double rate = Window(seconds).measure(sink.received);
  stop = true;
  node.join();
  server->Shutdown(std::chrono::system_clock::now() + 2s);
  return rate;
}

// The node's side of StreamUnrolls: a reader thread adds up credits.
class Credits {
 public:
  void add(uint32_t n) {
    std::lock_guard lock(mutex_);
    granted_ += n;
    changed_.notify_all();
  }
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }
  // Waits for a credit for unroll `sequence` (1, 2, …); false when the
  // stream closed or 5 s passed.
  bool wait(uint64_t sequence) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, 5s, [&] { return closed_ || granted_ >= sequence; }) && !closed_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t granted_ = 0;
  bool closed_ = false;
};

double through_gateway(const buffer::UnrollSpec& spec, uint32_t credits, double seconds) {
  auto ring = buffer::Ring::create(segment("gateway"), spec, kSlots);
  auto slab = buffer::WeightSlab::create(segment("slab"), 1024);
  const std::vector<float> weights(1024, 0.5f);
  slab->publish(weights.data());
  remote::GatewayOptions o;
  o.address = "127.0.0.1:0";
  o.token = kToken;
  o.version = "bench";
  o.job_id = o.incarnation = "bench";
  o.spec_hash = buffer::spec_hash(spec);
  o.credits = credits;
  auto gateway = std::make_unique<remote::ActorGateway>(o, *ring, *slab);
  const uint64_t slot_bytes = ring->layout().bytes;
  auto stub = v1::ActorGateway::NewStub(loopback_channel(gateway->port(), slot_bytes));

  auto authorise = [](grpc::ClientContext& context) {
    context.AddMetadata("authorization", std::string("Bearer ") + kToken);
    context.set_deadline(std::chrono::system_clock::now() + 60s);
  };
  v1::JoinRequest request;
  request.set_node_name("bench-node");
  request.set_version("bench");
  v1::JoinReply joined;
  grpc::ClientContext join_context;
  authorise(join_context);
  const grpc::Status status = stub->Join(&join_context, request, &joined);
  PRONGHORN_CHECK(status.ok(), "bench remote: Join: ", status.error_message());

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> taken{0};
  std::thread learner = consumer(*ring, stop, taken);
  std::thread node([&] {
    grpc::ClientContext context;
    authorise(context);
    context.AddMetadata(remote::kSessionMetadata, joined.session());
    auto stream = stub->StreamUnrolls(&context);
    Credits granted;
    std::thread replies([&] {
      v1::UnrollReply reply;
      while (stream->Read(&reply)) granted.add(reply.credits());
      granted.close();
    });
    v1::UnrollMessage message;
    message.set_policy_version(joined.policy_version());
    message.set_slot(std::string(slot_bytes, '\7'));
    for (uint64_t sequence = 1; !stop.load(std::memory_order_relaxed); ++sequence) {
      if (!granted.wait(sequence)) break;
      message.set_sequence(sequence);
      message.set_checksum(remote::crc32_of(message.slot().data(), slot_bytes));
      if (!stream->Write(message)) break;
    }
    stream->WritesDone();
    replies.join();
    const grpc::Status end = stream->Finish();
    if (!end.ok()) std::cerr << "bench remote: gateway stream: " << end.error_message() << "\n";
  });
  const double rate = Window(seconds).measure(taken);
  stop = true;
  node.join();
  learner.join();
  gateway.reset();
  return rate;
}

// Bytes on the wire for one unroll message of `slot_bytes` (see the top).
double wire_bytes(uint64_t slot_bytes) {
  v1::UnrollMessage message;
  message.set_sequence(1'000'000);
  message.set_policy_version(1'000'000);
  message.set_checksum(0xffffffff);
  message.set_processes_alive(4);
  message.set_env_us(100'000);
  message.set_slot(std::string(slot_bytes, '\0'));
  const double payload = static_cast<double>(message.ByteSizeLong()) + 5;
  constexpr double kFrame = 16384;
  return payload + 9 * std::ceil(payload / kFrame);
}

void bench_remote(const RemoteBenchArgs& args) {
  struct Case {
    const char* what;
    buffer::UnrollSpec spec;
  };
  const Case cases[] = {
      {"cartpole T=16 K=32 4 f32", {16, 32, {4}, Dtype::kFloat32, 0, 0}},
      {"pong T=32 K=32 1x32x32 u8", {32, 32, {1, 32, 32}, Dtype::kUInt8, 0, 0}},
  };
  std::cout << fmt::format(
      "bench remote: {:.1f} s a figure, {} credits, loopback, no TLS\n"
      "{:<27} {:>10} {:>12} {:>14} {:>9} {:>11} {:>12} {:>12}\n",
      args.seconds, args.credits, "slot", "path", "unrolls/s", "env steps/s", "MB/s", "wire B/step",
      "gw/raw gRPC", "gw/ring");
  for (const Case& c : cases) {
    const uint64_t bytes = buffer::slot_layout(c.spec).bytes;
    const double steps = static_cast<double>(c.spec.T * c.spec.K);
    const double ring = local_ring(c.spec, args.seconds);
    const double raw = raw_grpc(bytes, args.seconds);
    const double gateway = through_gateway(c.spec, args.credits, args.seconds);
    const double wire = wire_bytes(bytes) / steps;
    auto row = [&](const char* path, double rate, const std::string& wire_cell,
                   const std::string& ratios) {
      std::cout << fmt::format("{:<27} {:>10} {:>12.0f} {:>14.0f} {:>9.0f} {:>11} {}\n", c.what,
                               path, rate, rate * steps, rate * bytes / 1e6, wire_cell, ratios);
    };
    row("ring", ring, "-", "");
    row("raw gRPC", raw, fmt::format("{:.1f}", wire), "");
    row("gateway", gateway, fmt::format("{:.1f}", wire),
        fmt::format("{:>12.2f} {:>12.3f}", gateway / raw, gateway / ring));
  }
}

}  // namespace

CLI::App* add_bench_remote(CLI::App& bench, std::function<void()>& run) {
  auto args = std::make_shared<RemoteBenchArgs>();
  CLI::App* command = bench.add_subcommand(
      "remote", "Unrolls/s through the actor gateway on loopback against the ring and raw gRPC");
  command->add_option("--seconds", args->seconds, "measuring time per figure")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  command->add_option("--credits", args->credits, "remote.credits: unrolls in flight per node")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  run = [args] { bench_remote(*args); };
  return command;
}

}  // namespace pronghorn::cli
