// A job's control plane (docs/architecture.md §4): the gRPC server on
// server.address, with its bearer token (server.token_file, or one generated
// in the run directory), the address it listens on written to
// <run_dir>/server.address (for port 0 and `pronghorn status --run-dir`), and
// the Prometheus /metrics listener. Both serve the learner's ControlBoard.
#pragma once

#include <optional>
#include <string>

#include "control/control_server.h"
#include "control/metrics_exporter.h"
#include "core/config.h"
#include "learner/control_board.h"

namespace pronghorn::control {

class ControlPlane {
 public:
  // Throws Error naming the address, port or file when it cannot listen.
  // `token`: the job's, when the caller has it (several learners share
  // one); empty: server.token_file's, else the run directory's.
  ControlPlane(const ServerConfig& config, const std::string& run_dir, learner::ControlBoard& board,
               const std::string& token = "");

 private:
  std::optional<MetricsExporter> metrics_;
  std::optional<ControlServer> server_;  // destroyed first: it closes the board
};

}  // namespace pronghorn::control
