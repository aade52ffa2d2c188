#include "fleet/priority.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace pronghorn::fleet {

int actor_nice(const ActorConfig& actor, bool cluster) {
  if (actor.nice) return static_cast<int>(*actor.nice);
  return cluster ? 10 : 0;
}

void lower_priority(int nice) {
  if (nice <= 0) return;
  // On Linux a nice value belongs to a thread: each one is set, by its id.
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    const id_t tid = static_cast<id_t>(std::stoul(task.path().filename().string()));
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, tid);  // -1 is a nice value too: errno tells
    if (errno == 0 && now >= nice) continue;         // started lower still (`nice -n 15 …`)
    if (setpriority(PRIO_PROCESS, tid, nice) != 0) {
      spdlog::warn("actor.nice = {}: setpriority on thread {} failed: {}", nice, tid,
                   std::strerror(errno));
    }
  }
  if (error)
    spdlog::warn("actor.nice = {}: cannot list /proc/self/task: {}", nice, error.message());
}

}  // namespace pronghorn::fleet
