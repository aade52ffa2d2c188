// What `ps` and /proc/<pid>/cmdline show for a process that was forked, not
// executed: a zygote's child (fleet/zygote.h) runs another command line than
// the one its memory was started with, and operators (and tests) find actors
// by theirs.
//
// The kernel shows the bytes of the start-up arguments' area. A command line
// that fits there is written as exec would lay it out (NUL-separated); a
// longer one goes on over the environment's strings, which are copied away
// first, as one line with spaces (the kernel's setproctitle case, as in
// Chromium's zygote, nginx and PostgreSQL); what does not fit even there is
// cut. /proc/<pid>/environ then shows the title's tail: getenv() and environ
// are unaffected.
// Threads: call only while the process has one thread (it moves environ).
#pragma once

#include <string>
#include <vector>

namespace pronghorn::fleet {

// Shows `args` (args[0] the program name) as this process's command line;
// does nothing where /proc/self/stat cannot be read.
void set_process_title(const std::vector<std::string>& args);

}  // namespace pronghorn::fleet
