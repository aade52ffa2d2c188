#include "envs/python_env.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "envs/python_worker_source.h"

// POSIX: the program declares it; glibc does too, but only under _GNU_SOURCE.
extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace pronghorn::envs {
namespace {

using Clock = std::chrono::steady_clock;

// Run by `env.python -c`: refuses an interpreter older than 3.10 in words
// on the control socket, fd 3 (the worker's own syntax would fail to compile
// there), then runs the worker, its source and arguments being argv[1] and
// argv[2].
constexpr const char* kBootstrap =
    "import os, sys\n"
    "if sys.version_info < (3, 10):\n"
    "    os.write(3, ('error this is Python %d.%d; Python envs need 3.10 or newer\\n'"
    " % sys.version_info[:2]).encode())\n"
    "    sys.exit(2)\n"
    "source, sys.argv = sys.argv[1], ['pronghorn_worker.py'] + sys.argv[2:]\n"
    "exec(compile(source, 'pronghorn_worker.py', 'exec'), {'__name__': '__main__'})\n";

constexpr int kWorkerControlFd = 3;

// The worker's arguments as JSON: what to make, how many, its seed.
std::string worker_args(const EnvConfig& config, uint64_t seed) {
  toml::table options;
  for (const auto& [name, text] : config.options) {
    toml::table parsed = toml::parse("v = " + text);  // written by core/config_kinds.cpp
    options.insert(name, std::move(*parsed.get("v")));
  }
  toml::table args{{"name", config.name},
                   {"num_envs", config.num_envs},
                   {"seed", static_cast<int64_t>(seed & 0x7fffffffffffffffULL)},
                   {"max_episode_steps", config.max_episode_steps},
                   {"parent", static_cast<int64_t>(getpid())},
                   {"control_fd", kWorkerControlFd}};
  args.insert("options", std::move(options));
  std::ostringstream out;
  out << toml::json_formatter{args};
  return out.str();
}

// Receives up to a newline within `deadline`; the descriptor passed beside
// it, if any, in `fd`. "" when the worker closed its end first.
std::string receive_line(int socket, Clock::time_point deadline, int* fd, const std::string& env,
                         const std::string& python) {
  std::string line;
  while (line.find('\n') == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    PRONGHORN_CHECK(
        left.count() > 0, env, ": the env worker (", python, ") did not answer within ",
        std::chrono::duration_cast<std::chrono::seconds>(PythonEnv::kStartTimeout).count(), " s");
    pollfd p{socket, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    char data[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    iovec io{data, sizeof data};
    msghdr message{};
    message.msg_iov = &io;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && fd != nullptr) {
        std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
      }
    }
    line.append(data, static_cast<size_t>(n));
  }
  return line.substr(0, line.find('\n'));
}

int64_t integer(const toml::table& t, const char* key) {
  const auto v = t[key].value<int64_t>();
  PRONGHORN_CHECK(v.has_value(), "env worker spec: no integer ", key);
  return *v;
}

std::vector<float> floats(const toml::table& t, const char* key) {
  std::vector<float> out;
  if (const toml::array* a = t[key].as_array()) {
    for (const toml::node& n : *a) out.push_back(static_cast<float>(n.value<double>().value_or(0)));
  }
  return out;
}

}  // namespace

EnvSpec probe_python_env(const EnvConfig& config) {
  EnvConfig one = config;
  one.num_envs = 1;
  auto env = PythonEnv::start(one, 0);
  const EnvSpec& spec = env->spec();
  std::vector<uint8_t> obs(spec.obs_bytes()), final_obs(spec.obs_bytes());
  std::vector<float> actions(std::max<int64_t>(spec.action_size, 1), 0.0f);
  if (spec.action_kind == ActionKind::kContinuous) {
    for (size_t d = 0; d < spec.action_low.size() && d < actions.size(); ++d) {
      actions[d] = spec.action_low[d];  // in bounds, whatever they are
    }
  }
  float reward = 0;
  uint8_t terminated = 0, truncated = 0;
  env->reset(obs.data());
  env->step(actions.data(), {obs.data(), &reward, &terminated, &truncated, final_obs.data()});
  return spec;
}

bool PythonEnv::names_python_env(const std::string& name) {
  return name.starts_with("gymnasium:") || name.starts_with("envpool:") ||
         name.starts_with("python:");
}

std::unique_ptr<PythonEnv> PythonEnv::start(const EnvConfig& config, uint64_t seed) {
  const std::string env = fmt::format("env {}", config.name);
  const std::string python = config.python;
  int sockets[2];
  PRONGHORN_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) == 0, env,
                  ": socketpair: ", std::strerror(errno));
  const std::string source(kPythonWorkerSource);
  const std::string args = worker_args(config, seed);
  std::vector<std::string> argv_text = {python, "-c", kBootstrap, source, args};
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], kWorkerControlFd);  // clears CLOEXEC
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(sockets[1]);
  if (err != 0) {
    close(sockets[0]);
    throw UsageError(
        fmt::format("{}: cannot run env.python = \"{}\": {}", env, python, std::strerror(err)));
  }
  int memory_fd = -1;
  std::string line;
  try {
    line = receive_line(sockets[0], Clock::now() + kStartTimeout, &memory_fd, env, python);
  } catch (...) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    close(sockets[0]);
    throw;
  }
  auto refuse = [&](const std::string& why) {
    if (memory_fd >= 0) close(memory_fd);
    close(sockets[0]);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    throw UsageError(fmt::format("{} (env.python = \"{}\"): {}", env, python, why));
  };
  if (line.starts_with("error ")) refuse(line.substr(6));
  if (!line.starts_with("spec ") || memory_fd < 0) {
    refuse(line.empty() ? "the env worker ended before it made the env (its stderr says why)"
                        : "the env worker said \"" + line.substr(0, 80) + "\"");
  }
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + line.substr(5));
  } catch (const toml::parse_error& e) {
    refuse(fmt::format("the env worker's spec does not parse: {}", e.description()));
  }
  const toml::table& s = *parsed["v"].as_table();
  EnvSpec spec;
  spec.name = config.name;
  spec.obs_dtype =
      s["obs_dtype"].value_or(std::string()) == "uint8" ? Dtype::kUInt8 : Dtype::kFloat32;
  if (const toml::array* shape = s["obs_shape"].as_array()) {
    for (const toml::node& d : *shape) spec.obs_shape.push_back(d.value<int64_t>().value_or(0));
  }
  spec.action_kind = s["action_kind"].value_or(std::string()) == "continuous"
                         ? ActionKind::kContinuous
                         : ActionKind::kDiscrete;
  spec.action_size = integer(s, "action_size");
  spec.action_low = floats(s, "action_low");
  spec.action_high = floats(s, "action_high");
  spec.max_episode_steps = integer(s, "max_episode_steps");
  spec.target_return = s["target_return"].value_or(0.0);
  const toml::table* l = s["layout"].as_table();
  if (l == nullptr) refuse("the env worker's spec has no layout");
  const Layout layout{
      static_cast<size_t>(integer(*l, "actions")),   static_cast<size_t>(integer(*l, "obs")),
      static_cast<size_t>(integer(*l, "rewards")),   static_cast<size_t>(integer(*l, "terminated")),
      static_cast<size_t>(integer(*l, "truncated")), static_cast<size_t>(integer(*l, "final_obs")),
      static_cast<size_t>(integer(*l, "size"))};
  const size_t k = static_cast<size_t>(config.num_envs);
  const bool fits = layout.actions + spec.action_bytes() * k <= layout.size &&
                    layout.obs + spec.obs_bytes() * k <= layout.size &&
                    layout.rewards + sizeof(float) * k <= layout.size &&
                    layout.terminated + k <= layout.size && layout.truncated + k <= layout.size &&
                    layout.final_obs + spec.obs_bytes() * k <= layout.size;
  if (!fits) refuse("the env worker's memory layout does not hold its spec");
  return std::unique_ptr<PythonEnv>(
      new PythonEnv(std::move(spec), config.num_envs, python, pid, sockets[0], memory_fd, layout));
}

PythonEnv::PythonEnv(EnvSpec spec, int64_t num_envs, std::string python, pid_t pid, int socket,
                     int memory_fd, Layout layout)
    : BatchEnv(std::move(spec), num_envs),
      python_(std::move(python)),
      pid_(pid),
      socket_(socket),
      layout_(layout) {
  void* memory = mmap(nullptr, layout_.size, PROT_READ | PROT_WRITE, MAP_SHARED, memory_fd, 0);
  close(memory_fd);
  PRONGHORN_CHECK(memory != MAP_FAILED, label(),
                  ": mmap of the env worker's memory: ", std::strerror(errno));
  memory_ = static_cast<uint8_t*>(memory);
}

PythonEnv::~PythonEnv() {
  if (memory_ != nullptr) munmap(memory_, layout_.size);
  close(socket_);  // the worker reads the end of its commands and exits
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::string PythonEnv::label() const {
  return fmt::format("env {} (env.python = \"{}\")", spec().name, python_);
}

void PythonEnv::call(const char* command) {
  const std::string line = std::string(command) + "\n";
  if (send(socket_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    worker_failed(command);
  }
  // No deadline of its own: a step that never returns is the actors'
  // watchdog's to end (actor.stall_timeout_s), as with plugins.
  //
  // The reply is polled for first (kPollFor, yielding the core to whatever
  // else may run on it), then waited for: on a virtual machine a process
  // woken after sleeping through an env step can take 100 µs or more to run
  // again, as long as the step of a few envs itself (BENCHMARKS.md).
  std::string reply;
  const auto poll_until = Clock::now() + kPollFor;
  while (reply.find('\n') == std::string::npos) {
    char data[1024];
    const bool polling = Clock::now() < poll_until;
    const ssize_t n = recv(socket_, data, sizeof data, polling ? MSG_DONTWAIT : 0);
    if (n < 0 && polling && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      sched_yield();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) worker_failed(command);
    reply.append(data, static_cast<size_t>(n));
  }
  reply.resize(reply.find('\n'));
  if (reply == "ok") return;
  PRONGHORN_CHECK(!reply.starts_with("error "), label(), ": ", command,
                  " failed: ", reply.substr(6));
  throw Error(
      fmt::format("{}: {}: the env worker said \"{}\"", label(), command, reply.substr(0, 80)));
}

void PythonEnv::worker_failed(const std::string& during) {
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (waitpid(pid_, &status, WNOHANG) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string how = "is gone";
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    how = fmt::format("was killed by SIG{}", name ? name : "?");
  } else if (WIFEXITED(status)) {
    how = fmt::format("exited {}", WEXITSTATUS(status));
  }
  throw Error(fmt::format("{}: the env worker (pid {}) {} during {}", label(), pid_, how, during));
}

void PythonEnv::reset_unchecked(void* obs) {
  call("reset");
  std::memcpy(obs, memory_ + layout_.obs, spec().obs_bytes() * num_envs());
}

void PythonEnv::step_unchecked(const void* actions, const StepOutput& out) {
  const size_t k = static_cast<size_t>(num_envs());
  std::memcpy(memory_ + layout_.actions, actions, spec().action_bytes() * k);
  call("step");
  const size_t row = spec().obs_bytes();
  std::memcpy(out.obs, memory_ + layout_.obs, row * k);
  std::memcpy(out.rewards, memory_ + layout_.rewards, sizeof(float) * k);
  std::memcpy(out.terminated, memory_ + layout_.terminated, k);
  std::memcpy(out.truncated, memory_ + layout_.truncated, k);
  if (out.final_obs == nullptr) return;
  const uint8_t* ended_terminated = memory_ + layout_.terminated;
  const uint8_t* ended_truncated = memory_ + layout_.truncated;
  for (size_t i = 0; i < k; ++i) {  // only ended rows: the contract of envs/env.h
    if (ended_terminated[i] || ended_truncated[i]) {
      std::memcpy(static_cast<uint8_t*>(out.final_obs) + i * row,
                  memory_ + layout_.final_obs + i * row, row);
    }
  }
}

}  // namespace pronghorn::envs
