// Starting this node's child processes (actors, evaluations: this binary run
// with one of fleet/actor_command.h's command lines) and saying how one
// ended. A child is forked by the zygote `pronghorn train` made at the top of
// main (fleet/zygote.h: no exec, no second start-up of LibTorch), else
// executed afresh by posix_spawn; never a bare fork of a process with
// LibTorch's threads.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "fleet/actor_output.h"

namespace pronghorn::fleet {

class Zygote;

// The zygote (not owned; it outlives every child's starter) through which
// children whose program is this binary (/proc/self/exe) are forked;
// nullptr, the default: posix_spawn. The first spawn it fails (the zygote
// dead or late) is logged, and that child and every later one start by
// posix_spawn.
void start_actors_through(Zygote* zygote);

inline constexpr const char* kThisBinary = "/proc/self/exe";

// Starts `program` with `args` (args[0]: the name it shows), its fd 2 the
// write end of `output`, which is closed here once the child runs (so the
// pipe ends with the child). Throws pronghorn::Error naming `what` ("actor
// 3") when it cannot.
pid_t start_child(const std::string& program, const std::vector<std::string>& args,
                  ActorOutput& output, const std::string& what);

// How a child ended, in words: "killed by SIGSEGV", "exited 1: env plugin …"
// (its last line `last_line`, when it said "pronghorn: …" before a crash).
// `crash`: a non-zero exit, or a signal it raised itself (SIGSEGV, SIGABRT,
// SIGBUS, SIGFPE, SIGILL); a SIGKILL or SIGTERM came from outside.
struct ChildDeath {
  std::string how;
  bool crash = false;
};
ChildDeath death_of(int status, const std::string& last_line);

}  // namespace pronghorn::fleet
