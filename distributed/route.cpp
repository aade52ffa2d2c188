#include "distributed/route.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "core/error.h"

namespace pronghorn::distributed {
namespace {

std::string numeric_host(const sockaddr* addr, socklen_t length) {
  char text[NI_MAXHOST];
  const int rc = getnameinfo(addr, length, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  PRONGHORN_CHECK(rc == 0, "getnameinfo: ", gai_strerror(rc));
  return text;
}

}  // namespace

std::string local_address_toward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port > 0 ? port : 1);  // any port picks the route
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0) {
    throw UsageError("rank 0's address " + host + " does not resolve: " + gai_strerror(rc));
  }
  std::string error = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // connect() on a UDP socket only picks the route and the source address.
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      sockaddr_storage local{};
      socklen_t length = sizeof local;
      const bool named = getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
      close(fd);
      if (named) {
        freeaddrinfo(found);
        return numeric_host(reinterpret_cast<sockaddr*>(&local), length);
      }
    } else {
      error = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  throw UsageError("no route to rank 0 at " + host + ": " + error);
}

std::string address_of_interface(const std::string& name) {
  ifaddrs* list = nullptr;
  PRONGHORN_CHECK(getifaddrs(&list) == 0, "getifaddrs: ", std::strerror(errno));
  std::string address;
  std::set<std::string> names;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    names.insert(i->ifa_name);
    if (address.empty() && name == i->ifa_name) {
      address = numeric_host(i->ifa_addr, sizeof(sockaddr_in));
    }
  }
  freeifaddrs(list);
  if (address.empty()) {
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    throw UsageError(
        "distributed.interface = \"" + name +
        "\": no IPv4 address on such an interface here (interfaces with one: " + known + ")");
  }
  return address;
}

}  // namespace pronghorn::distributed
