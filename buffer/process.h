// Is a process alive, robustly against pid reuse: a pid names the same
// process only while its start time (from /proc/PID/stat) is unchanged.
#pragma once

#include <cstdint>

namespace pronghorn::buffer {

// Start time of `pid` in clock ticks since boot; 0 when it does not exist.
uint64_t process_start_time(int pid);

// False when `pid` is gone, a zombie, or (start_time ≠ 0) a different process
// now wearing the same pid.
bool process_alive(int pid, uint64_t start_time);

}  // namespace pronghorn::buffer
