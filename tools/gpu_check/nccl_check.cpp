// See nccl_check.h. Steps: a one-rank communicator comes up; all-reduces of
// floats and int64s and a broadcast leave known buffers as they must (a sum
// over one rank is the rank's own data) and a barrier returns; after a
// deliberate abort() every call throws PeerLost at once and the destructor
// ends; a second rank that never joins makes the init throw PeerLost by its
// deadline (NCCL's abort of a pending init). Each step has a deadline.
#include "tools/gpu_check/nccl_check.h"

#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "core/testing/error_of.h"
#include "distributed/nccl_collective.h"
#include "distributed/testing/in_memory_store.h"
#include "tools/gpu_check/device.h"

namespace pronghorn::gpu_check {
namespace {

using namespace std::chrono_literals;
using distributed::NcclCollective;
using distributed::PeerLost;
using Clock = std::chrono::steady_clock;

// The collective's own deadline, and the watchdog's past it.
constexpr auto kCallTimeout = 10s;
constexpr auto kStepDeadline = 60s;

std::unique_ptr<NcclCollective> make_collective(int world_size, distributed::KeyValueStore& store,
                                                std::chrono::milliseconds timeout) {
  return std::make_unique<NcclCollective>(distributed::make_cuda_nccl_api(), 0, world_size, store,
                                          timeout);
}

// Runs `step` (which returns "" on success, else what went wrong) on a thread
// of its own; prints PASS or FAIL with the time taken. Past kStepDeadline it
// prints the hang and ends the process: a stuck NCCL call cannot be cancelled.
bool run_step(const std::string& name, const std::function<std::string()>& step) {
  const Clock::time_point start = Clock::now();
  auto result = std::async(std::launch::async, [&] {
    try {
      return step();
    } catch (const std::exception& e) {
      return std::string("threw: ") + e.what();
    }
  });
  if (result.wait_for(kStepDeadline) != std::future_status::ready) {
    std::printf("  %-52s FAIL: still running after %lld s (a hang)\n", name.c_str(),
                static_cast<long long>(kStepDeadline.count()));
    std::fflush(stdout);
    std::_Exit(1);
  }
  const std::string error = result.get();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::printf("  %-52s %9.1f ms  %s%s\n", name.c_str(), ms,
              error.empty() ? "PASS" : "FAIL: ", error.c_str());
  std::fflush(stdout);
  return error.empty();
}

// Every element of `data` after a one-rank all-reduce: unchanged.
template <typename T>
std::string all_reduce_keeps(NcclCollective& collective, std::vector<T> data) {
  DeviceArray<T> device(data);
  collective.all_reduce_sum(std::span<T>(device.get(), data.size()));
  const std::vector<T> back = device.to_host();
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (back[i] != data[i]) {
      return "element " + std::to_string(i) + " is " + std::to_string(back[i]) + ", expected " +
             std::to_string(data[i]);
    }
  }
  return "";
}

std::string check_calls(NcclCollective& collective) {
  std::vector<float> floats(1 << 20);
  for (std::size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i % 1000) * 0.25f;
  std::string error = all_reduce_keeps(collective, floats);
  if (!error.empty()) return "float all-reduce: " + error;
  std::vector<int64_t> ints(1000);
  std::iota(ints.begin(), ints.end(), int64_t{1} << 40);
  error = all_reduce_keeps(collective, ints);
  if (!error.empty()) return "int64 all-reduce: " + error;
  std::vector<std::byte> bytes(1024, std::byte{0x5a});
  DeviceArray<std::byte> device(bytes);
  collective.broadcast(std::span<std::byte>(device.get(), bytes.size()), 0);
  if (device.to_host() != bytes) return "broadcast changed the root's bytes";
  collective.barrier();
  return "";
}

}  // namespace

int run_nccl_checks() {
  int version = 0;
  ncclGetVersion(&version);
  std::printf(
      "nccl: NCCL %d.%d.%d, the project's NcclCollective on device 0 (deadlines: %lld s "
      "a call, %lld s a step)\n",
      version / 10000, version / 100 % 100, version % 100,
      static_cast<long long>(kCallTimeout.count()), static_cast<long long>(kStepDeadline.count()));
  int failed = 0;
  distributed::testing::InMemoryStore store;
  std::unique_ptr<NcclCollective> collective;
  failed += !run_step("init, world size 1", [&] {
    collective = make_collective(1, store, kCallTimeout);
    return std::string();
  });
  if (collective == nullptr) return failed + 1;
  failed += !run_step("all-reduce 4 MiB floats, int64s; broadcast; barrier",
                      [&] { return check_calls(*collective); });
  failed += !run_step("abort(), then a call throws PeerLost at once", [&] {
    collective->abort();
    const Clock::time_point start = Clock::now();
    std::vector<float> one(1, 1.0f);
    DeviceArray<float> device(one);
    const std::string message = testing::error_of<PeerLost>(
        [&] { collective->all_reduce_sum(std::span<float>(device.get(), 1)); });
    if (message.find("aborted") == std::string::npos) {
      return "expected PeerLost naming the abort, got \"" + message + "\"";
    }
    if (Clock::now() - start > 1s) return std::string("PeerLost came after more than 1 s");
    collective.reset();  // the destructor of an aborted collective
    return std::string();
  });
  failed += !run_step("world size 2, rank 1 never joins: PeerLost by 3 s", [&] {
    // PeerLost naming the init: at its 3 s deadline, or sooner should NCCL
    // itself give up first; either way the pending init is aborted, no hang.
    distributed::testing::InMemoryStore lonely;
    const Clock::time_point start = Clock::now();
    const std::string message =
        testing::error_of<PeerLost>([&] { make_collective(2, lonely, 3s); });
    if (message.find("communicator init") == std::string::npos) {
      return "expected PeerLost naming the communicator init, got \"" + message + "\"";
    }
    if (Clock::now() - start > 10s) return std::string("PeerLost came after more than 10 s");
    return std::string();
  });
  return failed;
}

}  // namespace pronghorn::gpu_check
