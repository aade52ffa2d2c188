// SIGINT and SIGTERM as a request to stop cleanly, for the subcommands that
// run until stopped (train, the actor process, the actor-only node).
#pragma once

#include <atomic>

namespace pronghorn::cli {

// Installs the handlers (idempotent); the flag they set.
const std::atomic<bool>& install_stop_handlers();

}  // namespace pronghorn::cli
