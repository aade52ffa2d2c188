// An actor process (docs/architecture.md §1): K envs stepped as a batch → policy
// forward (inference mode, one intra-op thread) → sampled actions → the
// unroll written in place into a claimed ring slot → committed with the
// policy version it was acted with. New weights are taken from the slab
// between unrolls.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/config.h"

namespace pronghorn::actor {

struct ActorOptions {
  Config config;
  std::string ring;  // shm name of the learner's ring
  std::string slab;  // shm name of the learner's weight slab
  uint32_t actor_id = 0;
  uint32_t rank = 0;    // of its learner among several: envs are seeded apart per rank
  int learner_pid = 0;  // the actor exits when this process is gone (0: don't watch)
  // run.deterministic: the learner takes this many unrolls from every actor
  // per batch, in actor order (a group); 0 = off. Group g is acted with the
  // policy the learner published after training on group g − 2: the actor
  // waits for it before committing the last unroll of group g − 1, when the
  // learner cannot yet have published the version after it.
  uint32_t lockstep_unrolls = 0;
};

// Runs until `stop` is set (e.g. by SIGTERM) or the learner is gone; a slot
// being written then is abandoned, never committed half-written.
void run_actor(const ActorOptions& options, const std::atomic<bool>& stop);

}  // namespace pronghorn::actor
