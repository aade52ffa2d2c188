#include "envs/python_worker.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/fd_message.h"
#include "envs/python_worker_source.h"
#include "envs/python_worker_spec.h"

// POSIX: the program declares it; glibc does too, but only under _GNU_SOURCE.
extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace pronghorn::envs {
namespace {

// Run by `env.python -c`: refuses an interpreter older than 3.10 in words
// on the control socket, fd 3 (the worker's own syntax would fail to compile
// there), then makes pronghorn_vector.py's source (argv[1]) the module of
// that name and runs the worker, its source and arguments being argv[2] and
// argv[3].
constexpr const char* kBootstrap =
    "import os, sys, types\n"
    "if sys.version_info < (3, 10):\n"
    "    os.write(3, ('error this is Python %d.%d; Python envs need 3.10 or newer\\n'"
    " % sys.version_info[:2]).encode())\n"
    "    sys.exit(2)\n"
    "vector = types.ModuleType('pronghorn_vector')\n"
    "exec(compile(sys.argv[1], 'pronghorn_vector.py', 'exec'), vector.__dict__)\n"
    "sys.modules['pronghorn_vector'] = vector\n"
    "source, sys.argv = sys.argv[2], ['pronghorn_worker.py'] + sys.argv[3:]\n"
    "exec(compile(source, 'pronghorn_worker.py', 'exec'), {'__name__': '__main__'})\n";

constexpr int kWorkerControlFd = 3;
// The worker's arguments as JSON: what to make, how many, their seeds.
std::string worker_args(const EnvConfig& config, int64_t num_envs,
                        const std::vector<int64_t>& first_envs, uint64_t seed, bool with_packages) {
  toml::table options;
  for (const auto& [name, text] : config.options) {
    toml::table parsed = toml::parse("v = " + text);  // written by core/config_kinds.cpp
    options.insert(name, std::move(*parsed.get("v")));
  }
  toml::table args{{"name", config.name},
                   {"num_envs", num_envs},
                   {"seed", static_cast<int64_t>(seed & 0x7fffffffffffffffULL)},
                   {"max_episode_steps", config.max_episode_steps},
                   {"parent", static_cast<int64_t>(getpid())},
                   {"control_fd", kWorkerControlFd},
                   {"packages", with_packages}};
  args.insert("options", std::move(options));
  toml::array firsts;
  for (const int64_t first : first_envs) firsts.push_back(first);
  args.insert("first_envs", std::move(firsts));
  toml::array episode_info;
  for (const std::string& key : config.episode_info) episode_info.push_back(key);
  args.insert("episode_info", std::move(episode_info));
  std::ostringstream out;
  out << toml::json_formatter{args};
  return out.str();
}

// Receives up to a newline by `deadline` (Error naming `what` past it); the
// descriptor passed beside it, if any, in `*fd`. "" when the worker closed
// its end first.
std::string receive_line(int socket, PythonWorker::Clock::time_point deadline, int* fd,
                         const std::string& what) {
  std::string line;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - PythonWorker::Clock::now());
    PRONGHORN_CHECK(left.count() > 0, what);
    PRONGHORN_CHECK(line.size() < PythonWorker::kMaxLine, "the env worker's spec is longer than ",
                    PythonWorker::kMaxLine, " bytes");
    pollfd p{socket, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    char data[4096];
    const FdMessage message = receive_with_fd(socket, data, sizeof data);
    if (message.bytes < 0 && errno == EINTR) continue;
    if (message.bytes <= 0) return "";
    if (message.fd >= 0) {
      if (*fd >= 0) close(*fd);  // only the last one is kept
      *fd = message.fd;
    }
    const ssize_t n = message.bytes;
    line.append(data, static_cast<size_t>(n));
  }
  return line.substr(0, line.find('\n'));
}

}  // namespace

PythonWorker::PythonWorker(const EnvConfig& config, int64_t num_envs,
                           const std::vector<int64_t>& first_envs, uint64_t seed,
                           bool with_packages)
    : env_name_(config.name),
      python_(config.python),
      label_(fmt::format("env {} (env.python = \"{}\")", config.name, config.python)),
      num_envs_(num_envs) {
  int sockets[2];
  PRONGHORN_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0, label_,
                  ": socketpair: ", std::strerror(errno));
  const std::string vector(kPythonVectorSource), source(kPythonWorkerSource);
  const std::string args = worker_args(config, num_envs, first_envs, seed, with_packages);
  std::vector<std::string> argv_text = {python_, "-c", kBootstrap, vector, source, args};
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], kWorkerControlFd);  // clears CLOEXEC
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  const int err = posix_spawnp(&pid_, python_.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(sockets[1]);
  if (err != 0) {
    close(sockets[0]);
    throw UsageError(fmt::format("env {}: cannot run env.python = \"{}\": {}", env_name_, python_,
                                 std::strerror(err)));
  }
  socket_ = sockets[0];
}

PythonWorker::~PythonWorker() {
  if (memory_ != nullptr) munmap(memory_, layout_.size);
  if (socket_ >= 0) close(socket_);  // the worker reads the end of its commands and exits
  if (pid_ <= 0) return;
  const auto deadline = Clock::now() + kExitWait;
  while (waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

EnvSpec PythonWorker::await_spec(Clock::time_point deadline) {
  int memory_fd = -1;
  std::string line;
  try {
    line = receive_line(
        socket_, deadline, &memory_fd,
        fmt::format(
            "{}: the env worker did not make its envs within {} s", label_,
            std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now()).count()));
  } catch (const Error& e) {
    if (memory_fd >= 0) close(memory_fd);
    throw Error(e.what());
  }
  // Closed on every path below: mapped or not, the descriptor is not kept.
  struct CloseOnExit {
    int fd;
    ~CloseOnExit() {
      if (fd >= 0) close(fd);
    }
  } memory_closer{memory_fd};
  if (line.starts_with("error ")) refuse(line.substr(6));
  if (!line.starts_with("spec ") || memory_fd < 0) {
    refuse(line.empty() ? "the env worker ended before it made the env (its stderr says why)"
                        : "the env worker said \"" + line.substr(0, 80) + "\"");
  }
  std::pair<EnvSpec, Layout> read;
  try {
    const toml::table parsed = toml::parse("v = " + line.substr(5));
    const toml::table* s = parsed["v"].as_table();
    PRONGHORN_CHECK(s != nullptr, "the env worker's spec is not a table");
    read = read_worker_spec(*s, env_name_, num_envs_);
  } catch (const toml::parse_error& e) {
    refuse(fmt::format("the env worker's spec does not parse: {}", e.description()));
  } catch (const Error& e) {
    refuse(e.what());
  }
  // Sealed against shrinking, so no code in the worker can make this
  // process's reads of the memory fault (SIGBUS) later.
  struct stat st {};
  PRONGHORN_CHECK(fstat(memory_fd, &st) == 0 && static_cast<size_t>(st.st_size) >= read.second.size,
                  label_, ": the env worker's memory is smaller than its layout says");
  const int seals = fcntl(memory_fd, F_GET_SEALS);
  PRONGHORN_CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) != 0 && (seals & F_SEAL_SEAL) != 0, label_,
                  ": the env worker's memory is not sealed against shrinking");

  void* memory = mmap(nullptr, read.second.size, PROT_READ | PROT_WRITE, MAP_SHARED, memory_fd, 0);
  PRONGHORN_CHECK(memory != MAP_FAILED, label_,
                  ": mmap of the env worker's memory: ", std::strerror(errno));
  memory_ = static_cast<uint8_t*>(memory);
  layout_ = read.second;
  return std::move(read.first);
}

void PythonWorker::render(Clock::time_point deadline, int64_t& height, int64_t& width,
                          std::vector<uint8_t>& rgb) {
  send("render");
  int fd = -1;
  std::string line;
  try {
    line = receive_line(socket_, deadline, &fd, label_ + ": render did not return in time");
  } catch (const Error&) {
    if (fd >= 0) close(fd);
    throw;
  }
  struct CloseOnExit {
    int fd;
    ~CloseOnExit() {
      if (fd >= 0) close(fd);
    }
  } closer{fd};
  PRONGHORN_CHECK(!line.starts_with("error "), label_, ": render failed: ", line.substr(6));
  if (line.empty()) failed("render");
  std::istringstream in(line);
  std::string word;
  PRONGHORN_CHECK((in >> word >> height >> width) && word == "frame" && height >= 1 &&
                      height <= kMaxFrameSide && width >= 1 && width <= kMaxFrameSide && fd >= 0,
                  label_, ": render: the env worker said \"", line.substr(0, 80), "\"");
  rgb.resize(static_cast<size_t>(height * width * 3));
  size_t done = 0;
  while (done < rgb.size()) {
    const ssize_t n = pread(fd, rgb.data() + done, rgb.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    PRONGHORN_CHECK(n > 0, label_, ": render: the frame's memory holds ", done, " of ", rgb.size(),
                    " bytes");
    done += static_cast<size_t>(n);
  }
}

void PythonWorker::refuse(const std::string& why) {
  throw UsageError(fmt::format("{}: {}", label_, why));
}

void PythonWorker::send(const char* command) {
  started_ = Clock::now();
  const std::string line = std::string(command) + "\n";
  if (::send(socket_, line.data(), line.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(line.size())) {
    failed(command);
  }
}

void PythonWorker::await_reply(const char* command, Clock::time_point deadline) {
  const auto poll_until = Clock::now() + kPollFor;
  const bool bounded = deadline != Clock::time_point::max();
  while (received_.find('\n') == std::string::npos) {
    PRONGHORN_CHECK(received_.size() < kMaxLine, label_, ": the env worker's reply to ", command,
                    " is longer than ", kMaxLine, " bytes");
    char data[1024];
    const auto now = Clock::now();
    const bool polling = now < poll_until;
    if (!polling && bounded) {
      PRONGHORN_CHECK(now < deadline, label_, ": ", command, " did not return within ",
                      std::chrono::duration_cast<std::chrono::seconds>(deadline - started_).count(),
                      " s (PRONGHORN_ENV_PROBE_TIMEOUT_S)");
      pollfd p{socket_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000))) <= 0) continue;
    }
    const ssize_t n = recv(socket_, data, sizeof data, polling ? MSG_DONTWAIT : 0);
    if (n < 0 && polling && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      sched_yield();  // the core to whatever else may run on it
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) failed(command);
    received_.append(data, static_cast<size_t>(n));
  }
  // The next command's reply may have come with this one's (splits).
  const size_t end = received_.find('\n');
  const std::string reply = received_.substr(0, end);
  received_.erase(0, end + 1);
  if (reply == "ok") return;
  PRONGHORN_CHECK(!reply.starts_with("error "), label_, ": ", command,
                  " failed: ", reply.substr(6));
  throw Error(
      fmt::format("{}: {}: the env worker said \"{}\"", label_, command, reply.substr(0, 80)));
}

void PythonWorker::failed(const std::string& during) {
  const pid_t pid = pid_;
  int status = 0;
  const auto deadline = Clock::now() + kExitWait;
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string how = "stopped answering (it is killed)";  // by the destructor
  if (reaped == pid) {
    pid_ = -1;  // reaped here: the destructor has no process to wait for
    if (WIFSIGNALED(status)) {
      const char* name = sigabbrev_np(WTERMSIG(status));
      how = fmt::format("was killed by SIG{}", name ? name : "?");
    } else if (WIFEXITED(status)) {
      how = fmt::format("exited {}", WEXITSTATUS(status));
    }
  }
  throw Error(fmt::format("{}: the env worker (pid {}) {} during {}", label_, pid, how, during));
}

}  // namespace pronghorn::envs
