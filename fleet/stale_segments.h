// The sweep of shared memory left by dead owners (SIGKILL), done where a
// learner or an actor-only node starts: names carry the owner's pid and start
// time (buffer/segment_names.h), so a live owner's segments are never
// touched, whatever its run. Each removal and each failure is logged once.
#pragma once

namespace pronghorn::fleet {

void remove_stale_segments();

}  // namespace pronghorn::fleet
