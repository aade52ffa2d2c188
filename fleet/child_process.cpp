#include "fleet/child_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>

#include "core/error.h"
#include "fleet/zygote.h"

// POSIX: the program declares it; glibc does too, but only under _GNU_SOURCE.
extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace pronghorn::fleet {
namespace {

std::atomic<Zygote*> g_zygote{nullptr};

// The zygote's fork of `args` with `stderr_fd` as its fd 2, or -1.
pid_t fork_from_zygote(const std::vector<std::string>& args, int stderr_fd) {
  Zygote* zygote = g_zygote.load();
  if (zygote == nullptr) return -1;
  const pid_t pid = zygote->spawn(args, stderr_fd);
  if (pid < 0) {
    spdlog::warn("{}; actors start by posix_spawn from now on", zygote->failure());
    g_zygote = nullptr;
  }
  return pid;
}

// A signal a child raises itself, from a fault or an abort in its own code
// or its env's. Any other (SIGKILL, SIGTERM: an operator, the OOM killer, a
// test) came from outside.
bool self_raised(int signal) {
  return signal == SIGSEGV || signal == SIGABRT || signal == SIGBUS || signal == SIGFPE ||
         signal == SIGILL;
}

std::string signal_name(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", signal);
}

}  // namespace

void start_actors_through(Zygote* zygote) { g_zygote = zygote; }

pid_t start_child(const std::string& program, const std::vector<std::string>& args,
                  ActorOutput& output, const std::string& what) {
  pid_t pid = program == kThisBinary ? fork_from_zygote(args, output.child_end()) : -1;
  if (pid < 0) {
    output = ActorOutput();                 // a failed zygote may still hold the first pipe's end
    std::vector<std::string> owned = args;  // posix_spawn takes char* const[]
    std::vector<char*> argv;
    for (std::string& a : owned) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, output.child_end(), STDERR_FILENO);
    const int err = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    PRONGHORN_CHECK(err == 0, "cannot start ", what, ": ", std::strerror(err));
  }
  output.close_child_end();
  return pid;
}

ChildDeath death_of(int status, const std::string& last_line) {
  // The child's own last words: `pronghorn` ends on an error with one line
  // "pronghorn: <what went wrong>" (tools/main.cpp).
  constexpr std::string_view kPrefix = "pronghorn: ";
  const bool said_error = last_line.starts_with(kPrefix);
  const std::string said = said_error ? last_line.substr(kPrefix.size()) : last_line;
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const bool crash = self_raised(signal);
    // Before an abort, a failed check says where (PRONGHORN_ASSERT).
    return {
        fmt::format("killed by {}{}", signal_name(signal), crash && said_error ? ": " + said : ""),
        crash};
  }
  const int code = WEXITSTATUS(status);
  // Exit 0 is a child that stopped as asked (SIGTERM from outside).
  return {fmt::format("exited {}{}", code, said.empty() ? "" : ": " + said), code != 0};
}

}  // namespace pronghorn::fleet
