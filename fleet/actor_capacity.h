// How many actor processes this node holds (docs/architecture.md §2). An actor is a
// CPU-bound process of about 60 MiB of its own (RssAnon of the CartPole,
// Pendulum and Pong actors, measured; LibTorch's 110 MiB of code is shared),
// so past a few per core they only slow each other, and past the free memory
// the kernel's OOM killer ends the job. `actor.count` and `pronghorn scale`
// are refused beyond kActorsPerCore per core or beyond what free memory
// holds, unless `actor.oversubscribe = true` or `scale --oversubscribe`.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "core/config.h"

namespace pronghorn::fleet {

inline constexpr int kActorsPerCore = 2;
// Memory one more actor is counted at until a running one measures more:
// twice the 60 MiB measured, for envs with more state than the built-in ones.
inline constexpr uint64_t kActorBytesGuess = uint64_t{128} << 20;

// What this machine offers now.
struct MachineRoom {
  int cores = 1;  // CPUs this process may run on: its affinity mask, bounded by cgroup cpu.max
  uint64_t available_bytes = 0;  // MemAvailable, bounded by our cgroup's memory.max
};
MachineRoom measure_machine_room();

// The whole cores a cgroup v2 `cpu.max` line ("QUOTA PERIOD") allows,
// rounded up (a pod's limits.cpu of 1.5 is 2); 0 for "max …" or a bad line.
int cpu_max_cores(std::string_view cpu_max);

// Memory of its own (RssAnon) a process holds; 0 when it cannot be read.
uint64_t private_memory_bytes(pid_t pid);

// The most actors this node holds: by cores, and by memory beyond the
// `running` actors (whose memory is already taken), at `actor_bytes` each and
// a fifth of the free memory kept for the learner and the system.
struct ActorRoom {
  int cores = 1, by_cores = 1, running = 0, by_memory = 0;
  uint64_t available_bytes = 0, actor_bytes = 0;
  int cap() const { return by_cores < by_memory ? by_cores : by_memory; }
  std::string describe() const;  // "2 cores × 2 per core; memory: 20.1 GiB free holds …"
};
ActorRoom actor_room(const MachineRoom& machine, int running, uint64_t actor_bytes);

// UsageError "`asked`: this node holds at most N actors (why); `how_to_force`"
// when `wanted` is over room.cap().
void check_actor_room(int wanted, const ActorRoom& room, std::string_view asked,
                      std::string_view how_to_force);

// The actors a learner starts with: actor.count, or for "auto" one per spare
// core (the learner keeps one) and no more than memory holds; at least one.
// An actor.count over the cap is a UsageError unless actor.oversubscribe.
int initial_actor_count(const ActorConfig& config);

// What `train` refuses on this machine before any work, so that `pronghorn
// config` refuses it here too: an actor.count over what this node holds.
// Throws UsageError naming the key. Not for an actor-only node, whose actors
// are its own --processes.
void check_actor_count(const ActorConfig& config);

}  // namespace pronghorn::fleet
