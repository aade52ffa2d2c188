// `pronghorn clean`: removes the shared memory in /dev/shm of every Pronghorn
// learner that died without removing its own (SIGKILL, the OOM killer),
// whatever its run, and keeps a live learner's (buffer/segment_names.h says
// how the owner is told apart). A learner does the same when it starts; this
// is for a machine where none starts again soon. Prints one line per segment
// removed, then a summary of what it removed and what it kept:
//   removed /pronghorn.4121.8823190.ring.cartpole (3.2 MiB): learner 4121 of run cartpole is gone
//   removed 2 segments (3.3 MiB) of 1 dead learner; kept 2 segments of 1 live learner: 5120 (run x)
// Exit status 1 when a dead learner's segment could not be removed.
#include <fmt/format.h>

#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "buffer/segment_names.h"
#include "buffer/shared_memory.h"
#include "core/error.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

std::string count(size_t n, const char* noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// The distinct owners of `segments`: (pid, start time) → run.
std::map<std::pair<int, uint64_t>, std::string> owners(
    const std::vector<buffer::Segment>& segments) {
  std::map<std::pair<int, uint64_t>, std::string> out;
  for (const buffer::Segment& s : segments) out[{s.fields.pid, s.fields.start_time}] = s.fields.run;
  return out;
}

void run_clean() {
  const buffer::SegmentSweep sweep = buffer::remove_dead_segments();
  uint64_t removed_bytes = 0;
  for (const buffer::Segment& s : sweep.removed) {
    removed_bytes += s.bytes;
    std::cout << fmt::format("removed {} ({}): learner {} of run {} is gone\n", s.name,
                             buffer::format_bytes(s.bytes), s.fields.pid, s.fields.run);
  }
  std::string summary =
      sweep.removed.empty()
          ? std::string("removed nothing")
          : fmt::format("removed {} ({}) of {}", count(sweep.removed.size(), "segment"),
                        buffer::format_bytes(removed_bytes),
                        count(owners(sweep.removed).size(), "dead learner"));
  if (!sweep.kept.empty()) {
    const auto live = owners(sweep.kept);
    std::string who;
    for (const auto& [owner, run] : live) {
      who += fmt::format("{}{} (run {})", who.empty() ? "" : ", ", owner.first, run);
    }
    summary += fmt::format("; kept {} of {}: {}", count(sweep.kept.size(), "segment"),
                           count(live.size(), "live learner"), who);
  }
  std::cout << summary << "\n" << std::flush;
  for (const buffer::Segment& s : sweep.failed) {
    std::cerr << fmt::format("cannot remove {} of dead learner {}: {}\n", s.name, s.fields.pid,
                             s.error);
  }
  PRONGHORN_CHECK(sweep.failed.empty(), "could not remove ", count(sweep.failed.size(), "segment"),
                  " of dead learners");
}

}  // namespace

Command add_clean_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand(
      "clean", "Remove the shared memory of dead learners from /dev/shm (a live one's is kept)");
  return {command, [] { run_clean(); }};
}

}  // namespace pronghorn::cli
