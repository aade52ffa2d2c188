// Which local address the collectives bind (docs/architecture.md §2). Gloo's
// default binds whatever the hostname resolves to, which on many hosts is
// loopback, and then ranks on other machines never meet: we bind the address
// the kernel would use to reach rank 0, or the one of a named interface.
#pragma once

#include <string>

namespace pronghorn::distributed {

// The local IP address the routing table picks for reaching host:port (a UDP
// socket connected there; nothing is sent). Throws UsageError naming the host
// when it does not resolve or no route leads there.
std::string local_address_toward(const std::string& host, int port);

// The IPv4 address of network interface `name` (e.g. "eth0"); throws
// UsageError naming it and the interfaces there are when it has none.
std::string address_of_interface(const std::string& name);

}  // namespace pronghorn::distributed
