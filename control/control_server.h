// The learner's gRPC service (proto/pronghorn.proto, docs/architecture.md §4): answers
// status calls from a ControlBoard and queues steering calls on it for the
// learner's loop. Mutating calls need `authorization: Bearer <token>`
// (compared in constant time); read-only calls are open on a loopback
// address and need the token otherwise. TLS (and mutual TLS) by config.
// Threads: gRPC's callback threads serve the calls without waiting in them
// (see StatusStreams for WatchStatus); the owner constructs and destroys it.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "learner/control_board.h"

namespace pronghorn::control {

using learner::ControlBoard;

class ControlServer {
 public:
  // Listens on config.address; throws Error naming the address, or the TLS
  // file, when it cannot.
  ControlServer(const ServerConfig& config, std::string token, ControlBoard& board);
  // Closes the board (ending WatchStatus streams), then stops serving.
  ~ControlServer();

  int port() const;  // the port bound (the configured one, or the free one picked for 0)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pronghorn::control
