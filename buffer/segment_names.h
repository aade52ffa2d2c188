// The names of a learner's shared-memory segments, and the removal of those
// a dead learner left behind (docs/architecture.md §1). The one place that knows both.
//
//   /pronghorn.<pid>.<start>.<kind>.<run>     e.g. /pronghorn.4121.8823190.ring.cartpole-7
//
// <pid> and <start> name the owning learner process exactly: its pid and its
// start time in clock ticks since boot (process_start_time), so a process
// that later wears the same pid is another owner. <kind> is "ring" or "slab"
// (lower-case letters). <run> is the run name, there for people listing
// /dev/shm only: it is cut short so the whole name fits NAME_MAX, and
// nothing is decided by it. Names are read field by field from the front and
// never matched by prefix, so no run name (`X` against `X-123`, or one with
// dots) can make one learner's segments look like another's; a name is unique
// to its creating process and kind (SharedMemory::create refuses one that
// exists).
//
// A segment is stale when its name parses and its owner is provably gone
// (process_gone: no process has the pid, or the one that has it is a zombie
// or started at another time). Everything else in /dev/shm is left alone: a
// live learner's segments, names that do not parse as ours (other programs,
// older Pronghorn builds, tests), and owners whose state cannot be read.
//
// Test: buffer/segment_names_test.cpp. Users: learner start, `pronghorn clean`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pronghorn::buffer {

// The kinds of segment a learner owns.
inline constexpr std::string_view kRingSegment = "ring";
inline constexpr std::string_view kSlabSegment = "slab";

// The fields of a segment name.
struct SegmentName {
  int pid = 0;              // the owner's pid, > 0
  uint64_t start_time = 0;  // its process_start_time; 0 when it could not be read
  std::string kind;         // kRingSegment, kSlabSegment, …: 1 to 15 lower-case letters
  std::string run;          // the run name, possibly cut short; may hold '.'

  bool operator==(const SegmentName&) const = default;
};

// "/pronghorn.<pid>.<start>.<kind>.<run>", the run cut so that the name
// after its '/' is at most NAME_MAX (255) bytes. Throws Error for a kind that
// is not 1 to 15 lower-case letters, a pid ≤ 0, or a run holding '/' or NUL.
std::string segment_name(const SegmentName& fields);

// The name of this process's segment of `kind` for run `run`: the owner is
// getpid() with its start time.
std::string own_segment_name(std::string_view kind, std::string_view run);

// The fields of `name` (with or without its leading '/'), or nothing unless
// it has exactly the form above: decimal pid and start time without leading
// zeros, a kind of lower-case letters, and a run part after the fourth '.'.
// parse_segment_name(segment_name(f)) == f for every f not cut short.
std::optional<SegmentName> parse_segment_name(std::string_view name);

// One Pronghorn segment found in /dev/shm.
struct Segment {
  std::string name;  // "/pronghorn.…", as shm_open and shm_unlink take it
  SegmentName fields;
  uint64_t bytes = 0;  // its size
  std::string error;   // why it could not be removed (in SegmentSweep::failed)
};

// What remove_dead_segments found, in /dev/shm's listing order.
struct SegmentSweep {
  std::vector<Segment> removed;  // owner gone: unlinked
  std::vector<Segment> kept;     // owner alive, or not provably gone
  std::vector<Segment> failed;   // owner gone, but shm_unlink failed (e.g. another user's)
};

// Unlinks every segment in /dev/shm whose name parses and whose owner is
// provably gone, whatever its run; reports what it removed, kept and could
// not remove. Never throws for a single segment; a segment removed by
// someone else meanwhile is simply not listed. Any thread; several processes
// may sweep at once.
SegmentSweep remove_dead_segments();

}  // namespace pronghorn::buffer
