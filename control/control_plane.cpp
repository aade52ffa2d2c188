#include "control/control_plane.h"

#include <spdlog/spdlog.h>

#include "core/files.h"
#include "core/token.h"

namespace pronghorn::control {

ControlPlane::ControlPlane(const ServerConfig& config, const std::string& run_dir,
                           learner::ControlBoard& board, const std::string& job_token) {
  if (config.metrics_port >= 0) {
    metrics_.emplace(config.metrics_address, static_cast<int>(config.metrics_port), board);
    board.set_metrics_port(metrics_->port());
    spdlog::info("Prometheus metrics on http://{}:{}/metrics", config.metrics_address,
                 metrics_->port());
  }
  const std::string token = !job_token.empty() ? job_token
                            : config.token_file.empty()
                                ? read_or_create_token_file(run_dir + "/token")
                                : read_token_file(config.token_file);
  server_.emplace(config, token, board);
  board.set_control_port(server_->port());
  const std::string host = config.address.substr(0, config.address.rfind(':'));
  write_file_atomically(run_dir + "/server.address",
                        host + ":" + std::to_string(server_->port()) + "\n");
}

}  // namespace pronghorn::control
