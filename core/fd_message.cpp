#include "core/fd_message.h"

#include <sys/socket.h>

#include <cstring>

namespace pronghorn {

FdMessage receive_with_fd(int socket, void* data, size_t size) {
  iovec io{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  FdMessage received;
  received.bytes = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  if (received.bytes <= 0) return received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      std::memcpy(&received.fd, CMSG_DATA(c), sizeof received.fd);
    }
  }
  received.whole = (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
  return received;
}

}  // namespace pronghorn
