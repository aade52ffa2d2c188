// The client side of the control plane (proto/pronghorn.proto), shared by
// `pronghorn status | scale | checkpoint | stop`: where the learner is (a
// --target, else the run directory's server.address, else 127.0.0.1:7453),
// TLS when a CA is given, and the token for mutating calls (--token,
// --token-file, else the token file in the job's run directory, sent only
// to the address that directory records).
// Every failure throws Error (exit 1) or UsageError (exit 2) with one line.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "proto/pronghorn.pb.h"

namespace pronghorn::cli {

inline constexpr const char* kDefaultTarget = "127.0.0.1:7453";  // server.address's default

struct ControlArgs {
  std::string target;   // HOST:PORT
  std::string run_dir;  // finds the address and the token there
  std::string token, token_file;
  std::string tls_ca, tls_cert, tls_key;  // PEM files
  double timeout_s = 10;                  // per call
};
void add_control_options(CLI::App* command, ControlArgs& args);

class ControlClient {
 public:
  explicit ControlClient(const ControlArgs& args);
  ~ControlClient();

  v1::Status status();
  // Calls `on_status` for each message until the job ends.
  void watch(double interval_s, const std::function<void(const v1::Status&)>& on_status);
  // `node`: an actor-only node that joined the learner reached ("" = its own node).
  v1::ScaleActorsReply scale(int count, bool oversubscribe = false, const std::string& node = "");
  std::string save_checkpoint();    // its path
  std::string stop(bool graceful);  // the checkpoint written, or ""
  // " (run NAME, DIR)": the job this client reaches, from its status. With
  // several jobs on one machine a bare command reaches whichever holds
  // kDefaultTarget: every steering command prints this with its reply.
  std::string job_named();
  // The token this client sends (--token, --token-file, or the run
  // directory's), to reach another rank of the same job.
  std::string token();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pronghorn::cli
