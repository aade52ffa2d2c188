#include "learner/control_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/token.h"
#include "proto/pronghorn.grpc.pb.h"

namespace pronghorn::learner {
namespace {

using grpc::ServerContext;
using grpc::StatusCode;

constexpr auto kReplyTimeout = std::chrono::seconds(60);  // a checkpoint of a large model

std::string read_pem(const std::string& key, const std::string& path) {
  std::ifstream in(path);
  PRONGHORN_CHECK(in.good(), key, " = \"", path, "\": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  PRONGHORN_CHECK(text.str().find("-----BEGIN ") != std::string::npos, key, " = \"", path,
                  "\": not a PEM file");
  return text.str();
}

std::shared_ptr<grpc::ServerCredentials> credentials(const ServerConfig& c) {
  if (c.tls_cert.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      c.tls_client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!c.tls_client_ca.empty())
    options.pem_root_certs = read_pem("server.tls_client_ca", c.tls_client_ca);
  options.pem_key_cert_pairs.push_back(
      {read_pem("server.tls_key", c.tls_key), read_pem("server.tls_cert", c.tls_cert)});
  return grpc::SslServerCredentials(options);
}

class LearnerService final : public v1::Learner::Service {
 public:
  LearnerService(std::string token, bool open_reads, ControlBoard& board)
      : token_(std::move(token)), open_reads_(open_reads), board_(board) {}

  grpc::Status GetStatus(ServerContext* context, const v1::GetStatusRequest*,
                         v1::Status* reply) override {
    if (grpc::Status denied = authorize(context, false); !denied.ok()) return denied;
    *reply = board_.status();
    return grpc::Status::OK;
  }

  grpc::Status WatchStatus(ServerContext* context, const v1::WatchStatusRequest* request,
                           grpc::ServerWriter<v1::Status>* writer) override {
    if (grpc::Status denied = authorize(context, false); !denied.ok()) return denied;
    const double interval = request->interval_s() == 0 ? 1.0 : request->interval_s();
    if (!std::isfinite(interval) || interval < 0.05 || interval > 3600) {
      return {StatusCode::INVALID_ARGUMENT,
              fmt::format("interval_s = {}: expected 0 (1 s) or 0.05 to 3600 seconds",
                          request->interval_s())};
    }
    while (!context->IsCancelled()) {
      if (!writer->Write(board_.status())) break;
      if (!board_.sleep_unless_closed(std::chrono::duration<double>(interval))) {
        writer->Write(board_.status());  // the last one says `stopping`
        break;
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status ScaleActors(ServerContext* context, const v1::ScaleActorsRequest* request,
                           v1::ScaleActorsReply* reply) override {
    if (grpc::Status denied = authorize(context, true); !denied.ok()) return denied;
    if (request->count() < 0 || request->count() > kMaxActors) {
      return {StatusCode::INVALID_ARGUMENT,
              fmt::format("count = {}: expected 0 to {} actors", request->count(), kMaxActors)};
    }
    ControlReply r;
    grpc::Status status =
        carry_out({.kind = ControlRequest::Kind::kScaleActors, .actors = request->count()}, r);
    reply->set_previous(static_cast<uint32_t>(r.previous_actors));
    reply->set_desired(static_cast<uint32_t>(r.actors));
    return status;
  }

  grpc::Status SaveCheckpoint(ServerContext* context, const v1::SaveCheckpointRequest*,
                              v1::SaveCheckpointReply* reply) override {
    if (grpc::Status denied = authorize(context, true); !denied.ok()) return denied;
    ControlReply r;
    grpc::Status status = carry_out({.kind = ControlRequest::Kind::kSaveCheckpoint}, r);
    reply->set_path(r.checkpoint_path);
    return status;
  }

  grpc::Status Stop(ServerContext* context, const v1::StopRequest* request,
                    v1::StopReply* reply) override {
    if (grpc::Status denied = authorize(context, true); !denied.ok()) return denied;
    ControlReply r;
    grpc::Status status =
        carry_out({.kind = ControlRequest::Kind::kStop, .graceful = request->graceful()}, r);
    reply->set_checkpoint_path(r.checkpoint_path);
    return status;
  }

 private:
  // OK, or why this call may not go on: no token → UNAUTHENTICATED, a wrong
  // one → PERMISSION_DENIED.
  grpc::Status authorize(ServerContext* context, bool mutating) const {
    if (!mutating && open_reads_) return grpc::Status::OK;
    const auto& metadata = context->client_metadata();
    const auto found = metadata.find("authorization");
    if (found == metadata.end()) {
      spdlog::warn("control: {} without a token refused", context->peer());
      return {StatusCode::UNAUTHENTICATED,
              "this call needs the job's token: metadata `authorization: Bearer <token>` "
              "(pronghorn --token-file)"};
    }
    const std::string_view value(found->second.data(), found->second.size());
    constexpr std::string_view kScheme = "Bearer ";
    if (!value.starts_with(kScheme)) {
      return {StatusCode::UNAUTHENTICATED, "authorization metadata: expected `Bearer <token>`"};
    }
    if (!tokens_equal(value.substr(kScheme.size()), token_)) {
      spdlog::warn("control: {} with a wrong token refused", context->peer());
      return {StatusCode::PERMISSION_DENIED, "wrong token"};
    }
    return grpc::Status::OK;
  }

  // Queues `request` for the learner's loop and waits for its reply.
  grpc::Status carry_out(const ControlRequest& request, ControlReply& reply) {
    std::future<ControlReply> future = board_.submit(request);
    if (future.wait_for(kReplyTimeout) != std::future_status::ready) {
      return {StatusCode::DEADLINE_EXCEEDED, "the learner did not answer within 60 s"};
    }
    reply = future.get();
    if (reply.job_ending) return {StatusCode::UNAVAILABLE, reply.error};
    if (!reply.error.empty()) return {StatusCode::INTERNAL, reply.error};
    return grpc::Status::OK;
  }

  const std::string token_;
  const bool open_reads_;
  ControlBoard& board_;
};

}  // namespace

struct ControlServer::Impl {
  Impl(std::string token, bool open_reads, ControlBoard& b)
      : board(b), service(std::move(token), open_reads, b) {}
  ControlBoard& board;
  LearnerService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

ControlServer::ControlServer(const ServerConfig& config, std::string token, ControlBoard& board)
    : impl_(std::make_unique<Impl>(std::move(token), is_loopback_address(config.address), board)) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.address, credentials(config), &impl_->port);
  builder.RegisterService(&impl_->service);
  // Requests are a few bytes; a Status is under 1 KiB.
  builder.SetMaxReceiveMessageSize(64 * 1024);
  builder.SetMaxSendMessageSize(1 << 20);
  grpc::ResourceQuota quota("pronghorn-control");
  quota.SetMaxThreads(16);
  builder.SetResourceQuota(quota);
  impl_->server = builder.BuildAndStart();
  PRONGHORN_CHECK(impl_->server && impl_->port > 0, "server.address = \"", config.address,
                  "\": cannot listen there (another job on that port? port 0 picks a free one)",
                  config.tls_cert.empty() ? "" : ", or the TLS certificate or key is invalid");
  spdlog::info("control plane on {}{} (port {})", config.address,
               config.tls_cert.empty() ? "" : " with TLS", impl_->port);
}

ControlServer::~ControlServer() {
  impl_->board.close();
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

int ControlServer::port() const { return impl_->port; }

}  // namespace pronghorn::learner
