#include "fleet/zygote.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string_view>
#include <thread>

#include "core/error.h"
#include "core/fd_message.h"
#include "fleet/process_title.h"

namespace pronghorn::fleet {
namespace {

using Clock = std::chrono::steady_clock;

// The wire: one SOCK_SEQPACKET message each way, both ends this binary.
//   request: RequestHeader, then `count` × (uint32 length, bytes), and the
//            child's stderr as SCM_RIGHTS when it has one
//   reply:   Reply
struct RequestHeader {
  uint32_t magic;
  uint32_t count;
  uint64_t sequence;
};
struct Reply {
  uint64_t sequence;
  int32_t pid;    // > 0: the child, already the requester's
  int32_t error;  // errno where pid is not
};
constexpr uint32_t kMagic = 0x6f67797a;  // "zygo"

std::string encode_request(uint64_t sequence, const std::vector<std::string>& args) {
  const RequestHeader header{kMagic, static_cast<uint32_t>(args.size()), sequence};
  std::string out(reinterpret_cast<const char*>(&header), sizeof header);
  for (const std::string& arg : args) {
    const auto length = static_cast<uint32_t>(arg.size());
    out.append(reinterpret_cast<const char*>(&length), sizeof length);
    out.append(arg);
  }
  return out;
}

// The arguments of a whole request; nullopt for anything else.
std::optional<std::vector<std::string>> decode_request(std::string_view in, RequestHeader& header) {
  if (in.size() < sizeof header) return std::nullopt;
  std::memcpy(&header, in.data(), sizeof header);
  in.remove_prefix(sizeof header);
  if (header.magic != kMagic || header.count == 0) return std::nullopt;
  std::vector<std::string> args;
  for (uint32_t i = 0; i < header.count; ++i) {  // each takes 4 bytes at least: bounded
    uint32_t length = 0;
    if (in.size() < sizeof length) return std::nullopt;
    std::memcpy(&length, in.data(), sizeof length);
    in.remove_prefix(sizeof length);
    if (in.size() < length) return std::nullopt;
    args.emplace_back(in.substr(0, length));
    in.remove_prefix(length);
  }
  if (!in.empty()) return std::nullopt;
  return args;
}

// ---- in the zygote and its children ----

// The child proper: the zygote's start-up state, the requester's stderr.
[[noreturn]] void run_child(const Zygote::Main& main, const std::vector<std::string>& args,
                            int stderr_fd, const struct sigaction& sigint) {
  if (stderr_fd >= 0 && stderr_fd != STDERR_FILENO) {
    if (dup2(stderr_fd, STDERR_FILENO) < 0) _exit(127);
    close(stderr_fd);
  }
  sigaction(SIGINT, &sigint, nullptr);  // the only disposition the zygote changed
  set_process_title(args);
  _exit(main(args));
}

// Forks C, which forks the child and exits: the child is orphaned and goes
// to the requester, a subreaper while it waits. Once C is reaped here the
// move is done (the kernel reparents before C becomes a zombie).
Reply fork_child(int socket, int stderr_fd, const std::vector<std::string>& args,
                 const Zygote::Main& main, const struct sigaction& sigint) {
  Reply reply{0, -1, 0};
  int link[2];  // C -> zygote: the child's pid, or -errno
  if (pipe2(link, O_CLOEXEC) != 0) {
    reply.error = errno;
    return reply;
  }
  const pid_t c = fork();
  if (c == 0) {
    const pid_t child = fork();
    if (child == 0) {
      close(link[0]);
      close(link[1]);
      close(socket);  // the child never speaks to the zygote
      run_child(main, args, stderr_fd, sigint);
    }
    const int32_t result = child > 0 ? child : -errno;
    ssize_t n;
    do n = write(link[1], &result, sizeof result);
    while (n < 0 && errno == EINTR);
    _exit(0);
  }
  const int fork_error = errno;
  close(link[1]);
  if (c < 0) {
    reply.error = fork_error;
  } else {
    int32_t result = -EPIPE;  // C died before it wrote
    ssize_t n;
    do n = read(link[0], &result, sizeof result);
    while (n < 0 && errno == EINTR);
    while (waitpid(c, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (n == sizeof result && result > 0) {
      reply.pid = result;
    } else {
      reply.error = n == sizeof result ? -result : EPIPE;
    }
  }
  close(link[0]);
  return reply;
}

[[noreturn]] void serve(int socket, const Zygote::Main& main,
                        const std::vector<std::string>& title) {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction sigint {};
  sigaction(SIGINT, &ignore, &sigint);
  if (!title.empty()) set_process_title(title);
  std::vector<char> buffer(Zygote::kMaxRequestBytes);
  for (;;) {
    // Idle until asked: no deadline here; the parent's end closing ends it.
    const FdMessage message = receive_with_fd(socket, buffer.data(), buffer.size());
    if (message.bytes < 0 && errno == EINTR) continue;
    if (message.bytes <= 0) _exit(0);
    const ssize_t n = message.bytes;
    const int stderr_fd = message.fd;
    RequestHeader header{};
    const bool whole = message.whole;
    const auto args =
        whole ? decode_request({buffer.data(), static_cast<size_t>(n)}, header) : std::nullopt;
    Reply reply{header.sequence, -1, EPROTO};
    if (args) reply = fork_child(socket, stderr_fd, *args, main, sigint);
    reply.sequence = header.sequence;
    if (stderr_fd >= 0) close(stderr_fd);
    if (send(socket, &reply, sizeof reply, MSG_NOSIGNAL) != sizeof reply) {
      if (reply.pid > 0) kill(reply.pid, SIGKILL);  // no one would know of it
      _exit(0);
    }
  }
}

// ---- in the parent ----

// This process a child subreaper while in scope; as it was after.
class Subreaper {
 public:
  Subreaper() {
    prctl(PR_GET_CHILD_SUBREAPER, &before_);
    ok_ = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  }
  ~Subreaper() {
    if (before_ == 0) prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  Subreaper(const Subreaper&) = delete;
  Subreaper& operator=(const Subreaper&) = delete;
  bool ok() const { return ok_; }

 private:
  int before_ = 0;
  bool ok_ = false;
};

// 0 where /proc cannot tell.
int threads_of_this_process() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  int n = 0;
  while (const dirent* entry = readdir(dir)) n += entry->d_name[0] != '.';
  closedir(dir);
  return n;
}

// Whether `fd` is ready for `events` (or hung up, or failed: the call that
// follows says which) before `deadline`.
bool ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n != 0) return true;
  }
}

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return fmt::format("exited {}", WEXITSTATUS(status));
  const char* abbrev = sigabbrev_np(WTERMSIG(status));
  return abbrev != nullptr ? fmt::format("was killed by SIG{}", abbrev)
                           : fmt::format("was killed by signal {}", WTERMSIG(status));
}

}  // namespace

std::unique_ptr<Zygote> Zygote::start(const Main& main, const std::vector<std::string>& title) {
  int fds[2];
  PRONGHORN_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0,
                  "cannot create the zygote's socket: ", std::strerror(errno));
  // Output still buffered would be written twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  pid_t pid = -1;
  int fork_error = 0;
  {
    // Across the fork as well: the zygote's descendants learn at their fork
    // that an ancestor may adopt their orphans (kernels before 4.11 do not
    // tell them later).
    const Subreaper subreaper;
    if (subreaper.ok()) {
      pid = fork();
      if (pid == 0) {
        close(fds[0]);
        serve(fds[1], main, title);
      }
      fork_error = errno;
    } else {
      fork_error = errno;
    }
  }
  // Counted before anything here can start a thread: the fork handlers of
  // libraries with pools (OpenBLAS) have stopped theirs.
  const int threads = threads_of_this_process();
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    throw Error(fmt::format("cannot start the zygote: {}", std::strerror(fork_error)));
  }
  std::unique_ptr<Zygote> zygote(new Zygote(pid, fds[0]));
  PRONGHORN_CHECK(threads <= 1, threads,
                  " threads were running when the zygote was forked; it would hold any lock "
                  "they held");
  return zygote;  // (thrown above: the destructor ends the zygote)
}

Zygote::~Zygote() {
  std::lock_guard lock(mutex_);
  end(std::chrono::seconds(1));
}

std::string Zygote::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

pid_t Zygote::spawn(const std::vector<std::string>& args, int stderr_fd,
                    std::chrono::milliseconds timeout) {
  std::lock_guard lock(mutex_);
  if (socket_ < 0) return -1;
  const auto deadline = Clock::now() + timeout;
  const uint64_t sequence = ++sequence_;
  const std::string request = encode_request(sequence, args);
  if (args.empty() || request.size() > kMaxRequestBytes) {
    return fail(fmt::format("a request of {} arguments, {} bytes (at most {})", args.size(),
                            request.size(), kMaxRequestBytes));
  }
  // On until the reply: the child orphaned meanwhile comes to this process.
  const Subreaper subreaper;
  if (!subreaper.ok()) {
    return fail(fmt::format("cannot become a child subreaper: {}", std::strerror(errno)));
  }
  iovec io{const_cast<char*>(request.data()), request.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  if (stderr_fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &stderr_fd, sizeof stderr_fd);
  }
  const auto late = [&] {
    return fail(fmt::format("the zygote did not answer within {} ms", timeout.count()));
  };
  if (!ready(socket_, POLLOUT, deadline)) return late();
  ssize_t sent;
  do sent = sendmsg(socket_, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (sent < 0 && errno == EINTR);
  if (sent < 0 && (errno == EPIPE || errno == ECONNRESET)) return fail("the zygote is gone", true);
  if (sent != static_cast<ssize_t>(request.size())) {
    return fail(fmt::format("cannot write to the zygote: {}",
                            sent < 0 ? std::strerror(errno) : "a short write"));
  }
  if (!ready(socket_, POLLIN, deadline)) return late();
  Reply reply{};
  ssize_t got;
  do got = recv(socket_, &reply, sizeof reply, MSG_DONTWAIT);
  while (got < 0 && errno == EINTR);
  if (got == 0 || (got < 0 && errno == ECONNRESET)) return fail("the zygote is gone", true);
  if (got != sizeof reply || reply.sequence != sequence) {
    return fail(got < 0 ? fmt::format("cannot read from the zygote: {}", std::strerror(errno))
                        : "the zygote's answer is garbled");
  }
  if (reply.pid <= 0) {
    return fail(fmt::format("the zygote cannot fork: {}", std::strerror(reply.error)));
  }
  return reply.pid;
}

pid_t Zygote::fail(std::string why, bool gone) {
  // Its socket closes before it has quite exited: a moment to say how it did.
  const auto until = Clock::now() + (gone ? std::chrono::seconds(1) : Clock::duration::zero());
  int status = 0;
  while (!reaped_) {
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      why += fmt::format(" (it {})", how_it_ended(status));
    }
    if (r != 0 || Clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  failure_ = std::move(why);
  end(std::chrono::milliseconds(0));
  return -1;
}

void Zygote::end(std::chrono::milliseconds grace) {
  if (socket_ >= 0) close(socket_);  // the zygote reads its end and exits
  socket_ = -1;
  const auto deadline = Clock::now() + grace;
  while (!reaped_) {
    const pid_t r = waitpid(pid_, nullptr, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (Clock::now() >= deadline) {
      kill(pid_, SIGKILL);
      while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  reaped_ = true;
}

}  // namespace pronghorn::fleet
