// The parent's side of envs/plugin_probe.h: start the child, read its report
// and its output until both close or the deadline passes, reap it, and turn
// what happened into a spec or one Error.
#include "envs/plugin_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "envs/probe_report.h"
#include "envs/python_env.h"

// POSIX: the program declares it; glibc does too, but only under _GNU_SOURCE.
extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace pronghorn::envs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kMaxOutput = 64 * 1024;  // of the child's stdout and stderr, kept for the error

// A pipe whose ends are close-on-exec (no other child inherits them) and
// numbered above 9, so that placing the write end at fd 1, 2 or 3 of the
// child is always a real dup2 (which clears close-on-exec there).
struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    PRONGHORN_CHECK(pipe2(fds, O_CLOEXEC) == 0, "env probe: pipe: ", strerror(errno));
    read = fcntl(fds[0], F_DUPFD_CLOEXEC, 10);
    write = fcntl(fds[1], F_DUPFD_CLOEXEC, 10);
    ::close(fds[0]);
    ::close(fds[1]);
    PRONGHORN_CHECK(read >= 0 && write >= 0, "env probe: fcntl: ", strerror(errno));
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() { read = read >= 0 ? (::close(read), -1) : -1; }
  void close_write() { write = write >= 0 ? (::close(write), -1) : -1; }
};

struct ChildResult {
  std::string report, output;
  int status = 0;          // from waitpid
  bool timed_out = false;  // killed at the deadline
};

// Reads every open pipe until all close or `deadline`; false at the deadline.
bool read_until_closed(Pipe& report, Pipe& output, ChildResult& r, Clock::time_point deadline) {
  char buffer[4096];
  while (report.read >= 0 || output.read >= 0) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[2] = {{report.read, POLLIN, 0}, {output.read, POLLIN, 0}};
    const int ready = poll(fds, 2, static_cast<int>(std::min<long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return false;
    for (auto [pipe, text] : {std::pair{&report, &r.report}, std::pair{&output, &r.output}}) {
      const pollfd& fd = pipe == &report ? fds[0] : fds[1];
      if (pipe->read < 0 || (fd.revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(pipe->read, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        pipe->close_read();
        continue;
      }
      if (text->size() < kMaxOutput) text->append(buffer, static_cast<size_t>(n));
    }
  }
  return true;
}

// Runs `binary args…` with stdin from /dev/null, stdout and stderr into one
// pipe and the report into another at fd 3; kills it at the deadline.
ChildResult run_child(const std::string& binary, const std::vector<std::string>& args,
                      milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Pipe report, output;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, output.write, 1);
  posix_spawn_file_actions_adddup2(&actions, output.write, 2);
  posix_spawn_file_actions_adddup2(&actions, report.write, kProbeReportFd);
  // Signals this process blocks or handles must not reach the child so.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> all_args = args;
  all_args.insert(all_args.begin(), "pronghorn");
  std::vector<char*> argv;
  for (std::string& a : all_args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int err = posix_spawn(&pid, binary.c_str(), &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  PRONGHORN_CHECK(err == 0, "env probe: cannot start ", binary, ": ", strerror(err));
  report.close_write();
  output.close_write();

  ChildResult r;
  bool in_time = read_until_closed(report, output, r, deadline);
  // The pipes closed; the child may still be running (a hang at exit, or a
  // plugin that closed them itself): reap it, by the same deadline.
  while (in_time && waitpid(pid, &r.status, WNOHANG) == 0) {
    in_time = Clock::now() < deadline;
    if (in_time) std::this_thread::sleep_for(milliseconds(5));
  }
  if (!in_time) {
    kill(pid, SIGKILL);
    waitpid(pid, &r.status, 0);
    r.timed_out = true;
  }
  return r;
}

// The child's output on one line: its first line (where a sanitizer or
// glibc names the fault) and its last two, each cut to 200 characters.
std::string summarize_output(const std::string& output) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(start, std::min<size_t>(end - start, 200));
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
    start = end + 1;
  }
  if (lines.empty()) return "";
  if (lines.size() > 3) lines = {lines.front(), "…", lines[lines.size() - 2], lines.back()};
  return fmt::format("; its output: {}", fmt::join(lines, " | "));
}

// Where the child was when it stopped, from the last stage it reported.
std::string where(const ProbeReport& report) {
  const std::string env = report.env.empty() ? "" : fmt::format(" of env \"{}\"", report.env);
  if (report.stage.empty()) return "before loading the plugin";
  if (report.stage == "open") return "while loading it (dlopen, its entry function or its specs)";
  if (report.stage == "unload") return "while unloading it (dlclose or exit)";
  return fmt::format("in {}(){}", report.stage, env);
}

std::vector<EnvSpec> run_probe(const ProbeRequest& request, const ProbeCommand& command) {
  std::vector<std::string> args = command.args;
  for (std::string& a : request.args()) args.push_back(std::move(a));
  const ChildResult r = run_child(command.binary, args, command.deadline);
  const ProbeReport report = parse_probe_report(r.report);
  const std::string plugin = fmt::format("env plugin {}", request.plugin);
  if (r.timed_out) {
    throw Error(fmt::format(
        "{}: did not return within {:.3g} s {}, so it was killed (a hang? "
        "PRONGHORN_ENV_PROBE_TIMEOUT_S sets how long a plugin may take){}",
        plugin, command.deadline.count() / 1000.0, where(report), summarize_output(r.output)));
  }
  if (report.error) {
    if (report.usage_error) throw UsageError(*report.error);
    throw Error(*report.error);
  }
  if (WIFSIGNALED(r.status)) {
    const int signal = WTERMSIG(r.status);
    const char* abbreviation = sigabbrev_np(signal);
    throw Error(fmt::format("{}: killed by SIG{} ({}) {}{}", plugin,
                            abbreviation ? abbreviation : std::to_string(signal).c_str(),
                            strsignal(signal), where(report), summarize_output(r.output)));
  }
  if (WEXITSTATUS(r.status) != 0 || report.specs.empty()) {
    throw Error(fmt::format("{}: the probe process exited with status {} {} without a report{}",
                            plugin, WEXITSTATUS(r.status), where(report),
                            summarize_output(r.output)));
  }
  return report.specs;
}

}  // namespace

milliseconds ProbeCommand::default_probe_deadline() {
  const char* text = std::getenv("PRONGHORN_ENV_PROBE_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(60);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (*end != '\0' || !(seconds > 0 && seconds <= 86400)) {
    throw UsageError(fmt::format(
        "PRONGHORN_ENV_PROBE_TIMEOUT_S = \"{}\": expected seconds, more than 0 and at most 86400",
        text));
  }
  return milliseconds(static_cast<int64_t>(seconds * 1000));
}

EnvSpec probe_env_spec(const EnvConfig& config, const ProbeCommand& command) {
  check_episode_info(config);
  if (is_python_env(config)) {
    return probe_python_env(config, command.deadline);
  }
  if (config.plugin.empty()) {
    return make_builtin_env(config.name, 1, 0, config.max_episode_steps)->spec();
  }
  return run_probe({config.plugin, config.name, config.max_episode_steps, false}, command).front();
}

std::vector<EnvSpec> probe_plugin_specs(const std::string& path, const ProbeCommand& command) {
  return run_probe({path, "", 0, true}, command);
}

}  // namespace pronghorn::envs
