// Prometheus `/metrics` on 127.0.0.1:<port>: the Status the learner last
// published on its ControlBoard, read at scrape time, named by Prometheus
// conventions (pronghorn_env_steps_total, …_seconds), in the text format
// prometheus-cpp's serializer writes. GET /metrics answers 200; any other
// path 404, any other method 405; every connection closes after one reply.
// The HTTP side is a small listener of ours, not prometheus-cpp's Exposer:
// Debian's libcivetweb is built to start its threads with 100 KiB stacks (a
// compile-time setting, no runtime option); glibc wants the static TLS plus
// 16 KiB in a stack, and in a process that links LibTorch its OpenBLAS and
// glog alone hold ~90 KiB of static TLS, so pthread_create fails (EINVAL)
// and the Exposer throws on construction.
// Threads: one of its own multiplexes every connection with poll(). Each
// connection gets 2 s from accept for its whole exchange (request head in,
// reply out), and at most 64 are open (one more closes the oldest), so a
// client that stalls or trickles a byte at a time holds one slot for 2 s and
// delays no other scrape. The owner constructs and destroys it; destruction
// returns at once, whatever the clients are doing.
#pragma once

#include <memory>

#include "learner/control_board.h"

namespace pronghorn::learner {

class MetricsExporter {
 public:
  // Listens on 127.0.0.1:`port` (SO_REUSEADDR only: a port another socket
  // listens on is refused); port 0: a free port. Throws Error naming
  // server.metrics_port when it cannot listen.
  MetricsExporter(int port, const ControlBoard& board);
  ~MetricsExporter();

  int port() const;  // the port bound (the one picked, for port 0)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pronghorn::learner
