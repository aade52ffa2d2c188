#include "tools/control_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "control/grpc_auth.h"
#include "core/error.h"
#include "core/files.h"
#include "core/token.h"
#include "proto/pronghorn.grpc.pb.h"

namespace pronghorn::cli {
namespace {

// The address a job wrote into its run directory, or "".
std::string recorded_address(const std::string& run_dir) {
  std::ifstream in(run_dir + "/server.address");
  std::string address;
  in >> address;
  return address;
}

std::string resolve_target(const ControlArgs& a) {
  if (!a.target.empty()) return a.target;
  if (!a.run_dir.empty()) {
    std::string address = recorded_address(a.run_dir);
    if (address.empty()) {
      throw UsageError("--run-dir " + a.run_dir +
                       ": no server.address there (has a job run in this directory?)");
    }
    return address;
  }
  return kDefaultTarget;
}

}  // namespace

struct ControlClient::Impl {
  ControlArgs args;
  std::string target;
  std::unique_ptr<v1::Learner::Stub> stub;
  std::optional<std::string> token;  // found on first need

  std::unique_ptr<grpc::ClientContext> context(bool mutating, bool deadline = true) {
    auto c = std::make_unique<grpc::ClientContext>();
    if (deadline) {
      c->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(args.timeout_s * 1000)));
    }
    // Read-only calls carry the token too when one is given: off loopback
    // the server asks for it.
    const std::string t = mutating ? find_token() : given_token();
    if (!t.empty()) c->AddMetadata("authorization", "Bearer " + t);
    return c;
  }

  std::string given_token() const {
    if (!args.token.empty()) return args.token;
    if (!args.token_file.empty()) return read_token_file(args.token_file);
    return "";
  }

  // --token, --token-file, else the token of the job's run directory (--run-dir,
  // or the one the job reports) when that directory records this very target
  // as its address: a run directory's token goes to no other server.
  std::string find_token() {
    if (token) return *token;
    token = given_token();
    if (token->empty()) {
      const std::string dir = args.run_dir.empty() ? status().run_dir() : args.run_dir;
      if (recorded_address(dir) == target && std::filesystem::exists(dir + "/token")) {
        token = read_run_token_file(dir + "/token");
      }
    }
    return *token;
  }

  void check(const grpc::Status& s, const char* call) const {
    if (s.ok()) return;
    switch (s.error_code()) {
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        throw Error(
            fmt::format("cannot reach the learner at {} ({}); is a job running there? "
                        "(--target, --run-dir)",
                        target, s.error_message()));
      case grpc::StatusCode::INVALID_ARGUMENT:
      case grpc::StatusCode::FAILED_PRECONDITION:  // refused as asked (a scale past the cap)
        throw UsageError(fmt::format("{}: {}", call, s.error_message()));
      default:
        throw Error(
            fmt::format("{} refused by the learner at {}: {}", call, target, s.error_message()));
    }
  }

  v1::Status status() {
    v1::Status reply;
    auto c = context(false);
    check(stub->GetStatus(c.get(), v1::GetStatusRequest(), &reply), "status");
    return reply;
  }
};

void add_control_options(CLI::App* command, ControlArgs& args) {
  command->add_option(
      "--target", args.target,
      fmt::format("the learner's HOST:PORT (default: --run-dir's, else {})", kDefaultTarget));
  command->add_option(
      "--run-dir", args.run_dir,
      fmt::format("the job's run directory: its address and token are read there. With several "
                  "jobs on one machine, name the one you mean with --run-dir (or --target): "
                  "without either, the job on {} answers, whichever it is (every reply names "
                  "the run it came from)",
                  kDefaultTarget));
  command->add_option("--token", args.token, "bearer token for mutating calls");
  command->add_option("--token-file", args.token_file,
                      "file holding the token (default: the job's run directory's token)");
  command->add_option("--tls-ca", args.tls_ca, "PEM CA of the server's certificate: use TLS");
  command->add_option("--tls-cert", args.tls_cert, "PEM client certificate, for mutual TLS");
  command->add_option("--tls-key", args.tls_key, "PEM key of --tls-cert");
  command->add_option("--timeout", args.timeout_s, "seconds to wait for each call")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
}

ControlClient::ControlClient(const ControlArgs& args) : impl_(std::make_unique<Impl>()) {
  impl_->args = args;
  impl_->target = resolve_target(args);
  impl_->stub = v1::Learner::NewStub(grpc::CreateChannel(
      impl_->target, control::client_credentials(args.tls_ca, args.tls_cert, args.tls_key)));
}

ControlClient::~ControlClient() = default;

v1::Status ControlClient::status() { return impl_->status(); }

void ControlClient::watch(double interval_s,
                          const std::function<void(const v1::Status&)>& on_status) {
  v1::WatchStatusRequest request;
  request.set_interval_s(interval_s);
  auto c = impl_->context(false, /*deadline=*/false);
  auto reader = impl_->stub->WatchStatus(c.get(), request);
  v1::Status s;
  while (reader->Read(&s)) on_status(s);
  impl_->check(reader->Finish(), "watch");
}

v1::ScaleActorsReply ControlClient::scale(int count, bool oversubscribe, const std::string& node) {
  v1::ScaleActorsRequest request;
  request.set_count(count);
  request.set_oversubscribe(oversubscribe);
  request.set_node(node);
  v1::ScaleActorsReply reply;
  auto c = impl_->context(true);
  impl_->check(impl_->stub->ScaleActors(c.get(), request, &reply), "scale");
  return reply;
}

std::string ControlClient::save_checkpoint() {
  v1::SaveCheckpointReply reply;
  auto c = impl_->context(true);
  impl_->check(impl_->stub->SaveCheckpoint(c.get(), v1::SaveCheckpointRequest(), &reply),
               "checkpoint");
  return reply.path();
}

std::string ControlClient::stop(bool graceful) {
  v1::StopRequest request;
  request.set_graceful(graceful);
  v1::StopReply reply;
  auto c = impl_->context(true);
  impl_->check(impl_->stub->Stop(c.get(), request, &reply), "stop");
  return reply.checkpoint_path();
}

std::string ControlClient::token() { return impl_->find_token(); }

std::string ControlClient::job_named() {
  v1::Status reply;
  auto c = impl_->context(true);  // with the token: off loopback, status calls need it
  impl_->check(impl_->stub->GetStatus(c.get(), v1::GetStatusRequest(), &reply), "status");
  return fmt::format(" (run {}, {})", reply.run_name(), reply.run_dir());
}

}  // namespace pronghorn::cli
