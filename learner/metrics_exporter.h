// Prometheus `/metrics` on 127.0.0.1:<port>: the Status the learner last
// published on its ControlBoard, read at scrape time, named by Prometheus
// conventions (pronghorn_env_steps_total, …_seconds), in the text format
// prometheus-cpp's serializer writes.
// The HTTP side is a small listener of ours, not prometheus-cpp's Exposer:
// civetweb starts its threads with 100 KiB stacks, less than LibTorch's
// static thread-local storage, so pthread_create fails (EINVAL) in any
// process that links LibTorch.
// Threads: one of its own serves scrapes, one at a time; the owner
// constructs and destroys it.
#pragma once

#include <memory>

#include "learner/control_board.h"

namespace pronghorn::learner {

class MetricsExporter {
 public:
  // port 0: any free port. Throws Error naming server.metrics_port when it
  // cannot listen.
  MetricsExporter(int port, const ControlBoard& board);
  ~MetricsExporter();

  int port() const;  // the port bound

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pronghorn::learner
