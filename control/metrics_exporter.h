// Prometheus `/metrics` on 127.0.0.1:<port>: the Status the learner last
// published on its ControlBoard, read at scrape time, named by Prometheus
// conventions (pronghorn_env_steps_total, …_seconds), in the text format
// prometheus-cpp's serializer writes. GET /metrics answers 200; any other
// path 404, any other method 405.
// HTTP is GNU libmicrohttpd (MHD): maintained, in Debian, event-driven, and
// its one thread's stack size is an option (set to 1 MiB here).
// Not prometheus-cpp's Exposer: Debian's civetweb starts its threads with
// 100 KiB stacks (compile-time only), too small for LibTorch's ~105 KB of
// static TLS, so its pthread_create fails (EINVAL).
// Threads: MHD's one internal thread serves every connection from one epoll
// loop (request heads in, replies out), so a client that stalls or trickles
// a byte at a time delays no other scrape. A connection idle for 2 s is
// closed (a keep-alive one between scrapes too). MHD's timeout counts from
// the last byte moved, so a trickler holds its connection until its head
// outgrows MHD's 32 KiB per-connection memory; at most 256 are open, and more
// wait in the listen backlog until one closes. The owner constructs and
// destroys it; destruction stops that thread and returns at once, whatever
// the clients are doing.
#pragma once

#include <memory>
#include <string>

#include "learner/control_board.h"

namespace pronghorn::control {

using learner::ControlBoard;

class MetricsExporter {
 public:
  // Listens on `host`:`port`, host an IPv4 address (SO_REUSEADDR only, never
  // SO_REUSEPORT: a port another socket listens on is refused); port 0: a
  // free port. Throws Error naming server.metrics_port when it cannot listen.
  MetricsExporter(const std::string& host, int port, const ControlBoard& board);
  ~MetricsExporter();

  int port() const;  // the port bound (the one picked, for port 0)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pronghorn::control
