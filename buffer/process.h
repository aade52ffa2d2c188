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

// True only when it is certain that the process `pid` started at
// `start_time` (0: at any time) will never run again: no process has the pid
// (ESRCH), or the one that has it is a zombie or (start_time ≠ 0) started at
// another time. Unlike !process_alive, an unreadable /proc/PID/stat of a pid
// that exists is no proof, so the answer is false.
bool process_gone(int pid, uint64_t start_time);

}  // namespace pronghorn::buffer
