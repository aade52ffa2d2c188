#include "buffer/segment_names.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include "buffer/process.h"
#include "buffer/testing/spawn.h"
#include "core/testing/error_of.h"

namespace pronghorn::buffer {
namespace {

using namespace std::chrono_literals;

bool exists(const std::string& name) {
  struct stat st {};
  return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

// A small segment named `name`, made the way any process could.
void make_segment(const std::string& name) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
}

// Polls `ready` every 10 ms for up to 10 s; its last answer.
bool wait_for(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A real process holding a ring and a slab named for it and `run`, as a
// learner does; SIGKILLed when the test leaves, by any path.
struct SegmentOwner {
  std::string run;
  pid_t pid = testing::spawn_helper({"own-segments", run});
  std::string ring, slab;

  explicit SegmentOwner(std::string r) : run(std::move(r)) {
    const uint64_t start = process_start_time(pid);
    ring = segment_name({pid, start, std::string(kRingSegment), run});
    slab = segment_name({pid, start, std::string(kSlabSegment), run});
  }
  ~SegmentOwner() { kill_and_reap(); }
  bool ready() const { return exists(ring) && exists(slab); }
  void kill_and_reap() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    testing::wait_exit(pid);
    pid = -1;
  }
};

std::vector<std::string> names(const std::vector<Segment>& segments) {
  std::vector<std::string> out;
  for (const Segment& s : segments) out.push_back(s.name);
  return out;
}

bool holds(const std::vector<Segment>& segments, const std::string& name) {
  const std::vector<std::string> all = names(segments);
  return std::find(all.begin(), all.end(), name) != all.end();
}

TEST(SegmentNamesTest, NamesRoundTripThroughTheParser) {
  const SegmentName f{4121, 8823190, "ring", "cartpole-7"};
  EXPECT_EQ(segment_name(f), "/pronghorn.4121.8823190.ring.cartpole-7");
  EXPECT_EQ(parse_segment_name(segment_name(f)), f);
  EXPECT_EQ(parse_segment_name("pronghorn.4121.8823190.ring.cartpole-7"), f) << "'/' optional";
  for (const SegmentName& g : {SegmentName{1, 0, "slab", ""}, SegmentName{7, 9, "slab", "a.b.c"},
                               SegmentName{2147483647, 18446744073709551615ull, "ring", "x"}}) {
    EXPECT_EQ(parse_segment_name(segment_name(g)), g) << segment_name(g);
  }

  const std::string own = own_segment_name(kSlabSegment, "X");
  EXPECT_EQ(parse_segment_name(own),
            (SegmentName{getpid(), process_start_time(getpid()), "slab", "X"}));

  const std::string long_run(400, 'r');
  const std::string cut = segment_name({123, 456, "ring", long_run});
  EXPECT_EQ(cut.size(), 1u + 255) << "the run is cut to fit NAME_MAX";
  const auto parsed = parse_segment_name(cut);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->pid, 123);
  EXPECT_EQ(parsed->start_time, 456u);
  EXPECT_EQ(parsed->run, long_run.substr(0, parsed->run.size()));

  for (const char* other :
       {"/pronghorn-X-123-ring", "/pronghorn.0.1.ring.x", "/pronghorn.012.1.ring.x",
        "/pronghorn.12.01.ring.x", "/pronghorn.12.1.Ring.x", "/pronghorn.12.1.ring",
        "/pronghorn.12.x.ring.r", "/pronghorn.-1.1.ring.r", "/pronghorn.99999999999.1.ring.r",
        "/pronghorn.12.1..r", "/pronghorn.12.1.sixteenletterssss.r", "/other.1.2.ring.r",
        "/pronghorn.12.1.ring.a/b", ""}) {
    EXPECT_FALSE(parse_segment_name(other)) << other;
  }
  EXPECT_NE(pronghorn::testing::error_of([] { segment_name({0, 1, "ring", "x"}); }), "");
  EXPECT_NE(pronghorn::testing::error_of([] { segment_name({1, 1, "Ring", "x"}); }), "");
  EXPECT_NE(pronghorn::testing::error_of([] { segment_name({1, 1, "ring", "a/b"}); }), "");
}

TEST(SegmentNamesTest, RunXNeverRemovesTheSegmentsOfALiveJobXDash123) {
  SegmentOwner live("X-123"), dead("X");
  ASSERT_TRUE(wait_for([&] { return live.ready() && dead.ready(); }));
  EXPECT_FALSE(live.ring.starts_with(dead.ring) || live.slab.starts_with(dead.slab))
      << "one run's names are no prefix of another's";
  dead.kill_and_reap();
  // (Another test's sweep, run in parallel, may remove the dead ones first:
  // what holds is the state after a sweep.)
  const SegmentSweep sweep = remove_dead_segments();
  EXPECT_TRUE(holds(sweep.kept, live.ring) && holds(sweep.kept, live.slab));
  EXPECT_FALSE(exists(dead.ring) || exists(dead.slab));
  EXPECT_TRUE(exists(live.ring) && exists(live.slab)) << "the live job's segments stay";
}

TEST(SegmentNamesTest, RemovesADeadOwnersSegmentsAndKeepsALiveOnes) {
  const std::string run = "segment-test-" + std::to_string(getpid());
  SegmentOwner owner(run);
  ASSERT_TRUE(wait_for([&] { return owner.ready(); }));
  SegmentSweep sweep = remove_dead_segments();
  EXPECT_TRUE(holds(sweep.kept, owner.ring) && holds(sweep.kept, owner.slab));
  EXPECT_FALSE(holds(sweep.removed, owner.ring));
  EXPECT_TRUE(owner.ready()) << "a live owner's segments stay";

  // SIGKILLed, not yet reaped: a zombie never runs again.
  ASSERT_EQ(kill(owner.pid, SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return process_gone(owner.pid, 0); }));
  // Any learner starting meanwhile (ctest runs tests in parallel) sweeps
  // too, so the segments may already be gone: what holds is that they are
  // gone after a sweep, and that a sweep that removed one says whose it was.
  sweep = remove_dead_segments();
  for (const Segment& s : sweep.removed) {
    if (s.name == owner.ring) {
      EXPECT_EQ(s.fields.run, run);
      EXPECT_GT(s.bytes, 0u);
    }
  }
  EXPECT_FALSE(exists(owner.ring) || exists(owner.slab));
  EXPECT_TRUE(sweep.failed.empty()) << names(sweep.failed).front();
  owner.kill_and_reap();
  sweep = remove_dead_segments();
  EXPECT_FALSE(holds(sweep.removed, owner.ring)) << "removed once";
}

TEST(SegmentNamesTest, APidWornByAnotherProcessIsAGoneOwner) {
  const std::string reused = segment_name({getpid(), process_start_time(getpid()) + 1, "ring",
                                           "pid-reuse-" + std::to_string(getpid())});
  make_segment(reused);
  remove_dead_segments();  // (or another test's sweep, run in parallel)
  EXPECT_FALSE(exists(reused));
}

TEST(SegmentNamesTest, LeavesAloneWhatIsNotADeadOwnersSegment) {
  pid_t gone = testing::spawn_helper({"own-segments", "short-lived"});
  kill(gone, SIGKILL);
  testing::wait_exit(gone);
  const uint64_t start = process_start_time(getpid());
  const std::string tag = std::to_string(getpid()), dead = std::to_string(gone);
  const std::vector<std::string> left_alone = {
      own_segment_name(kRingSegment, "own-" + tag),                  // this live process's
      segment_name({getpid(), 0, "ring", "any-start-" + tag}),       // start unknown, pid alive
      "/pronghorn-X-" + dead + "-ring",                              // an older build's naming
      "/pronghorn." + dead + ".12x.ring.bad-" + tag,                 // not ours
      "/pronghorn." + dead + "." + std::to_string(start) + ".ring",  // no run field
  };
  for (const std::string& name : left_alone) make_segment(name);
  const SegmentSweep sweep = remove_dead_segments();
  for (const std::string& name : left_alone) {
    EXPECT_TRUE(exists(name)) << name;
    EXPECT_FALSE(holds(sweep.removed, name)) << name;
    shm_unlink(name.c_str());
  }
  EXPECT_TRUE(holds(sweep.kept, left_alone[0]) && holds(sweep.kept, left_alone[1]));
}

}  // namespace
}  // namespace pronghorn::buffer
