// A separate process for the buffer tests (real processes, killed for real):
//   buffer_helper produce RING COUNT ACTOR [slow]
//       commits COUNT unrolls of the test pattern; `slow` pauses mid-write.
//   buffer_helper read-slab SLAB COUNT SECONDS
//       reads the weight slab for SECONDS, checks every copy holds one
//       version throughout, prints "reads R mixed M", exits 1 if M > 0.
//   buffer_helper own-segments RUN
//       creates a ring and a slab named for this process and RUN, as a
//       learner does, and holds them for 60 s (or until killed).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "buffer/ring.h"
#include "buffer/segment_names.h"
#include "buffer/testing/pattern.h"
#include "buffer/weight_slab.h"

using namespace pronghorn::buffer;

static int produce(const std::string& name, uint64_t count, uint64_t actor, bool slow) {
  auto ring = Ring::attach(name, testing::test_spec());
  const size_t bytes = ring->layout().bytes;
  const size_t half = testing::words(bytes) / 2;
  for (uint64_t seq = 0; seq < count; ++seq) {
    auto slot = ring->claim(std::chrono::seconds(20));
    if (!slot) return 3;
    uint8_t* data = ring->slot_data(*slot);
    testing::fill(data, bytes, actor, seq, 0, half);
    if (slow)
      std::this_thread::sleep_for(std::chrono::microseconds(500 + testing::mix(seq) % 1500));
    testing::fill(data, bytes, actor, seq, half, testing::words(bytes));
    ring->commit(*slot, {.policy_version = seq, .actor = static_cast<uint32_t>(actor)});
  }
  return 0;
}

static int read_slab(const std::string& name, int64_t count, double seconds) {
  auto slab = WeightSlab::attach(name, count);
  std::vector<float> params(count);
  uint64_t reads = 0, mixed = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const uint64_t v = slab->read(params.data());
    if (v == 0) continue;
    ++reads;
    for (float p : params) {
      if (p != static_cast<float>(v)) {
        ++mixed;
        break;
      }
    }
  }
  std::printf("reads %llu mixed %llu\n", static_cast<unsigned long long>(reads),
              static_cast<unsigned long long>(mixed));
  return mixed == 0 ? 0 : 1;
}

static int own_segments(const std::string& run) {
  auto ring = Ring::create(own_segment_name(kRingSegment, run), testing::test_spec(), 2);
  auto slab = WeightSlab::create(own_segment_name(kSlabSegment, run), 16);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 0;
}

int main(int argc, char** argv) {
  try {
    std::string what = argc > 1 ? argv[1] : "";
    if (what == "produce" && argc >= 5) {
      return produce(argv[2], std::strtoull(argv[3], nullptr, 10),
                     std::strtoull(argv[4], nullptr, 10),
                     argc > 5 && std::string(argv[5]) == "slow");
    }
    if (what == "read-slab" && argc == 5) {
      return read_slab(argv[2], std::strtoll(argv[3], nullptr, 10), std::atof(argv[4]));
    }
    if (what == "own-segments" && argc == 3) return own_segments(argv[2]);
    std::fprintf(stderr,
                 "usage: buffer_helper produce RING COUNT ACTOR [slow] | read-slab SLAB COUNT "
                 "SECONDS | own-segments RUN\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "buffer_helper: %s\n", e.what());
    return 1;
  }
}
