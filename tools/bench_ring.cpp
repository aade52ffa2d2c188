// `pronghorn bench ring`: actor → learner throughput through the shared-
// memory ring for realistic slots, as a ratio to a plain memcpy of the same
// bytes measured in the same run, and commit → consumer-wake latency.
// The producer thread writes each slot whole (a memcpy, as an actor filling
// it); the consumer takes B = 4 at a time and copies each into a batch
// buffer (as the learner stacks them), then releases them.
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>
#include <vector>

#include "buffer/ring.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kSlots = 16;
constexpr uint32_t kBatch = 4;

// GB/s of single-thread memcpy of `bytes` blocks for about `seconds`, over
// the same working set as the ring: from kSlots sources into kBatch targets
// (a cache-resident memcpy would flatter the baseline).
double memcpy_gbps(size_t bytes, double seconds) {
  std::vector<uint8_t> src(bytes * kSlots, 1), dst(bytes * kBatch);
  uint64_t copies = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto start = Clock::now();
  while (Clock::now() < end) {
    std::memcpy(dst.data() + bytes * (copies % kBatch), src.data() + bytes * (copies % kSlots),
                bytes);
    ++copies;
  }
  return copies * bytes / std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
}

double ring_gbps(const std::string& name, const buffer::UnrollSpec& spec, double seconds) {
  auto ring = buffer::Ring::create(name, spec, kSlots);
  const size_t bytes = ring->layout().bytes;
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    auto mine = buffer::Ring::attach(name, spec);
    std::vector<uint8_t> unroll(bytes, 7);
    while (!stop.load(std::memory_order_relaxed)) {
      auto slot = mine->claim(100ms);
      if (!slot) continue;
      std::memcpy(mine->slot_data(*slot), unroll.data(), bytes);
      mine->commit(*slot, {});
    }
  });
  std::vector<uint8_t> batch(bytes * kBatch);
  uint64_t unrolls = 0;
  if (auto warm_up = ring->take(kBatch, 0, 1, 5s)) ring->release(*warm_up);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    auto taken = ring->take(kBatch, 0, 1, 1s);
    if (!taken) continue;
    for (size_t b = 0; b < taken->size(); ++b) {
      std::memcpy(batch.data() + b * bytes, (*taken)[b].data, bytes);
    }
    ring->release(*taken);
    unrolls += taken->size();
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  producer.join();
  return unrolls * bytes / elapsed / 1e9;
}

// Median and p99 in microseconds from commit to the blocked consumer's wake.
std::pair<double, double> wake_latency_us(const std::string& name, const buffer::UnrollSpec& spec,
                                          int samples) {
  auto ring = buffer::Ring::create(name, spec, 4);
  std::thread producer([&] {
    auto mine = buffer::Ring::attach(name, spec);
    for (int i = 0; i < samples; ++i) {
      std::this_thread::sleep_for(500us);  // the consumer is asleep when the commit lands
      auto slot = mine->claim(1s);
      if (slot) mine->commit(*slot, {});
    }
  });
  std::vector<double> latency;
  for (int i = 0; i < samples; ++i) {
    auto taken = ring->take(1, 0, 1, 2s);
    if (!taken) break;
    latency.push_back((buffer::monotonic_ns() - (*taken)[0].commit_ns) / 1e3);
    ring->release(*taken);
  }
  producer.join();
  std::sort(latency.begin(), latency.end());
  if (latency.empty()) return {0, 0};
  return {latency[latency.size() / 2], latency[latency.size() * 99 / 100]};
}

void bench_ring(double seconds) {
  struct Case {
    const char* what;
    buffer::UnrollSpec spec;
  };
  const Case cases[] = {
      {"cartpole T=32 K=256", {32, 256, {4}, Dtype::kFloat32, 0, 0}},
      {"pixels T=20 K=32 1x84x84 uint8", {20, 32, {1, 84, 84}, Dtype::kUInt8, 0, 0}},
  };
  const std::string name = "/pronghorn-bench-ring-" + std::to_string(getpid());
  for (const Case& c : cases) {
    const size_t bytes = buffer::slot_layout(c.spec).bytes;
    const double base = memcpy_gbps(bytes, seconds / 2);
    const double ring = ring_gbps(name, c.spec, seconds);
    std::cout << fmt::format(
        "bench ring: {} ({:.0f} KiB a slot): {:.2f} GB/s actor→learner, memcpy {:.2f} GB/s, "
        "ratio {:.2f}\n",
        c.what, bytes / 1024.0, ring, base, ring / base);
  }
  auto [median, p99] = wake_latency_us(name, cases[0].spec, 1000);
  std::cout << fmt::format("bench ring: commit → consumer wake: median {:.1f} us, p99 {:.1f} us\n",
                           median, p99);
}

}  // namespace

CLI::App* add_bench_ring(CLI::App& bench, std::function<void()>& run) {
  auto seconds = std::make_shared<double>(2.0);
  CLI::App* command = bench.add_subcommand(
      "ring", "Actor→learner GB/s through the ring against memcpy, and wake latency");
  command->add_option("--seconds", *seconds, "measuring time per figure")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 600.0));
  run = [seconds] { bench_ring(*seconds); };
  return command;
}

}  // namespace pronghorn::cli
