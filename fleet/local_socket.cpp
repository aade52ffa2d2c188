#include "fleet/local_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace pronghorn::fleet {
namespace {

// The abstract address of `name`: a leading NUL, then the name.
socklen_t address_of(const std::string& name, sockaddr_un& address) {
  address = {};
  address.sun_family = AF_UNIX;
  PRONGHORN_CHECK(name.size() + 1 < sizeof address.sun_path, "local socket name too long: ", name);
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

int new_socket(int flags) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  PRONGHORN_CHECK(fd >= 0, "local socket: ", std::strerror(errno));
  return fd;
}

}  // namespace

int listen_local(const std::string& name) {
  const int fd = new_socket(SOCK_NONBLOCK);
  sockaddr_un address;
  const socklen_t size = address_of(name, address);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&address), size) != 0 || listen(fd, 1) != 0) {
    const int err = errno;
    close(fd);
    throw Error("local socket " + name + ": " + std::strerror(err));
  }
  return fd;
}

int accept_local(int listener, pid_t peer, std::chrono::milliseconds wait) {
  pollfd p{listener, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return -1;
  const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return -1;
  ucred who{};
  socklen_t size = sizeof who;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &size) != 0 || who.pid != peer) {
    close(fd);  // not the process this socket was made for
    return -1;
  }
  return fd;
}

int connect_local(const std::string& name) {
  const int fd = new_socket(0);
  sockaddr_un address;
  const socklen_t size = address_of(name, address);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), size) != 0) {
    const int err = errno;
    close(fd);
    throw Error("local socket " + name + ": cannot connect: " + std::strerror(err));
  }
  return fd;
}

void send_text(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    PRONGHORN_CHECK(n > 0, "local socket: the other process is gone (", std::strerror(errno), ")");
    text.remove_prefix(static_cast<size_t>(n));
  }
}

bool receive_text(int fd, std::string& inbox, std::chrono::milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(wait.count())) <= 0) return true;
  char buffer[4096];
  const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  if (n == 0) return false;
  inbox.append(buffer, static_cast<size_t>(n));
  return true;
}

}  // namespace pronghorn::fleet
