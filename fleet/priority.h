// The actor processes' CPU priority (actor.nice). With several learner
// ranks every learner step ends in an all-reduce that waits for the slowest
// rank, so a learner thread kept off its core by its own node's actors holds
// every rank back; actors at a lower priority leave their learner the core
// as soon as it is runnable (BENCHMARKS.md, issue 37). A learner alone
// waits for its actors' unrolls instead, and its actors keep the default.
#pragma once

#include "core/config.h"

namespace pronghorn::fleet {

// actor.nice resolved: its value, or for "auto" 10 in a cluster and 0 alone.
int actor_nice(const ActorConfig& actor, bool cluster);

// Sets the nice value of every thread of this process to `nice` (> 0; 0
// leaves it), so the threads and processes it starts later inherit it. A
// thread already lower (a job started under `nice -n 15`) stays as it is:
// this never raises a priority. Lowering one's own needs no privilege; a
// failure is logged.
void lower_priority(int nice);

}  // namespace pronghorn::fleet
