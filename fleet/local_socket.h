// A Unix stream socket between two processes of this machine, named in the
// abstract namespace (no file to leave behind), carrying text: how the
// learner and its kept evaluation process talk (learner/evaluation_process.h).
// Every wait has a deadline; errors throw pronghorn::Error naming the socket.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>

namespace pronghorn::fleet {

// A listening socket named `name` (close-on-exec, non-blocking).
int listen_local(const std::string& name);
// The connection of process `peer` to `listener`, once one comes within
// `wait`; -1 when none came. A connection from any other process is closed.
int accept_local(int listener, pid_t peer, std::chrono::milliseconds wait);
// A connection to the socket named `name` (close-on-exec).
int connect_local(const std::string& name);

// Writes all of `text`; Error when the peer is gone.
void send_text(int fd, std::string_view text);
// Appends to `inbox` what arrives within `wait`; false once the peer closed.
bool receive_text(int fd, std::string& inbox, std::chrono::milliseconds wait);

}  // namespace pronghorn::fleet
