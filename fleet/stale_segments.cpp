#include "fleet/stale_segments.h"

#include <spdlog/spdlog.h>

#include "buffer/segment_names.h"
#include "buffer/shared_memory.h"

namespace pronghorn::fleet {

void remove_stale_segments() {
  const buffer::SegmentSweep sweep = buffer::remove_dead_segments();
  for (const buffer::Segment& s : sweep.removed) {
    spdlog::info("removed stale shared memory {} ({}) of dead process {} of run {}", s.name,
                 buffer::format_bytes(s.bytes), s.fields.pid, s.fields.run);
  }
  for (const buffer::Segment& s : sweep.failed) {
    spdlog::warn("cannot remove stale shared memory {} of dead process {}: {}", s.name,
                 s.fields.pid, s.error);
  }
}

}  // namespace pronghorn::fleet
