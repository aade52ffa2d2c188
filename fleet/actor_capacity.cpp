#include "fleet/actor_capacity.h"

#include <fmt/format.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "buffer/shared_memory.h"
#include "core/error.h"

namespace pronghorn::fleet {
namespace {

// "Key:   123 kB" of a /proc status-like file, in bytes; `fallback` when absent.
uint64_t kib_field(const std::string& path, std::string_view key, uint64_t fallback) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key) && line.size() > key.size() && line[key.size()] == ':') {
      std::istringstream value(line.substr(key.size() + 1));
      uint64_t kib = 0;
      if (value >> kib) return kib * 1024;
    }
  }
  return fallback;
}

// A number in a cgroup file ("max" and unreadable files are no limit).
uint64_t cgroup_number(const std::string& path) {
  std::ifstream in(path);
  uint64_t n = 0;
  if (in >> n) return n;
  return std::numeric_limits<uint64_t>::max();
}

// Calls `visit` with the folder of our cgroup (v2) and of each parent: a
// limit anywhere above us binds us too.
template <typename Visit>
void for_each_cgroup(Visit visit) {
  std::ifstream in("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(in, line)) {
    if (line.starts_with("0::")) path = line.substr(3);
  }
  if (path.empty()) return;
  for (;;) {
    visit("/sys/fs/cgroup" + (path == "/" ? std::string() : path));
    if (path == "/" || path.empty()) break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

// What our cgroups still let us allocate: in a container MemAvailable is
// the host's, the container's limit is memory.max.
uint64_t cgroup_room() {
  uint64_t room = std::numeric_limits<uint64_t>::max();
  for_each_cgroup([&](const std::string& dir) {
    const uint64_t max = cgroup_number(dir + "/memory.max");
    if (max != std::numeric_limits<uint64_t>::max()) {
      const uint64_t current = cgroup_number(dir + "/memory.current");
      room = std::min(room, current < max ? max - current : 0);
    }
  });
  return room;
}

// The cores our cgroups' CPU quotas allow (a pod's limits.cpu), or `cores`
// when none is lower: the affinity mask of a container is the host's.
int cgroup_cores(int cores) {
  for_each_cgroup([&](const std::string& dir) {
    std::ifstream in(dir + "/cpu.max");
    std::string text;
    std::getline(in, text);
    if (const int quota = cpu_max_cores(text); quota > 0) cores = std::min(cores, quota);
  });
  return cores;
}

}  // namespace

int cpu_max_cores(std::string_view cpu_max) {
  unsigned long long quota = 0, period = 0;
  const std::string text(cpu_max);
  if (std::sscanf(text.c_str(), "%llu %llu", &quota, &period) != 2 || period == 0) return 0;
  return static_cast<int>(std::max<unsigned long long>(1, (quota + period - 1) / period));
}

MachineRoom measure_machine_room() {
  MachineRoom room;
  cpu_set_t set;
  CPU_ZERO(&set);
  room.cores = sched_getaffinity(0, sizeof set, &set) == 0
                   ? CPU_COUNT(&set)
                   : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  room.cores = std::max(1, cgroup_cores(room.cores));
  room.available_bytes = std::min(kib_field("/proc/meminfo", "MemAvailable", 0), cgroup_room());
  return room;
}

uint64_t private_memory_bytes(pid_t pid) {
  return kib_field("/proc/" + std::to_string(pid) + "/status", "RssAnon", 0);
}

ActorRoom actor_room(const MachineRoom& machine, int running, uint64_t actor_bytes) {
  ActorRoom room;
  room.cores = machine.cores;
  room.by_cores = kActorsPerCore * machine.cores;
  room.running = running;
  room.available_bytes = machine.available_bytes;
  room.actor_bytes = std::max<uint64_t>(1, actor_bytes);
  const uint64_t usable = machine.available_bytes - machine.available_bytes / 5;
  const uint64_t more = usable / room.actor_bytes;
  room.by_memory = static_cast<int>(std::min<uint64_t>(more + running, 1 << 20));
  return room;
}

std::string ActorRoom::describe() const {
  return fmt::format("{} core{} × {} per core; memory: {} free holds {} more at about {} each",
                     cores, cores == 1 ? "" : "s", kActorsPerCore,
                     buffer::format_bytes(available_bytes), by_memory - running,
                     buffer::format_bytes(actor_bytes));
}

void check_actor_room(int wanted, const ActorRoom& room, std::string_view asked,
                      std::string_view how_to_force) {
  if (wanted <= room.cap()) return;
  throw UsageError(fmt::format("{}: this node holds at most {} actor{} ({}); {}", asked, room.cap(),
                               room.cap() == 1 ? "" : "s", room.describe(), how_to_force));
}

int initial_actor_count(const ActorConfig& config) {
  const ActorRoom room = actor_room(measure_machine_room(), 0, kActorBytesGuess);
  if (config.count) {
    const int wanted = static_cast<int>(*config.count);
    if (!config.oversubscribe) {
      check_actor_room(wanted, room, fmt::format("actor.count = {}", wanted),
                       "set actor.oversubscribe = true to start them anyway");
    }
    return wanted;
  }
  const int spare = std::max(1, room.cores - 1);  // the learner keeps one core
  if (room.by_memory < spare) {
    spdlog::warn("actor.count = \"auto\": {} actors, not one per spare core ({}): {}",
                 std::max(1, room.by_memory), spare, room.describe());
  }
  return std::max(1, std::min(spare, room.by_memory));
}

void check_actor_count(const ActorConfig& config) {
  if (config.count) initial_actor_count(config);  // "auto" always fits
}

}  // namespace pronghorn::fleet
