#include "buffer/process.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pronghorn::buffer {
namespace {

// The state letter and start time of /proc/PID/stat; false when unreadable.
bool read_stat(int pid, char& state, uint64_t& start_time) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[1024];
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  // "pid (comm) S ppid ...": comm may hold spaces and ')', so parse after the last ')'.
  const char* p = std::strrchr(text, ')');
  if (p == nullptr || p[1] != ' ') return false;
  state = p[2];
  // Field 3 is the state; start time is field 22, 19 fields later.
  p += 2;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  start_time = std::strtoull(p, nullptr, 10);
  return true;
}

}  // namespace

uint64_t process_start_time(int pid) {
  char state;
  uint64_t start = 0;
  return read_stat(pid, state, start) ? start : 0;
}

bool process_alive(int pid, uint64_t start_time) {
  char state;
  uint64_t start = 0;
  if (!read_stat(pid, state, start)) return false;
  if (state == 'Z' || state == 'X') return false;
  return start_time == 0 || start == start_time;
}

bool process_gone(int pid, uint64_t start_time) {
  if (pid <= 0) return false;  // kill() would name a process group
  char state;
  uint64_t start = 0;
  if (read_stat(pid, state, start)) {
    return state == 'Z' || state == 'X' || (start_time != 0 && start != start_time);
  }
  return kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace pronghorn::buffer
