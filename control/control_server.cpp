#include "control/control_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "control/grpc_auth.h"
#include "control/status_streams.h"
#include "control/unparsed_requests.h"
#include "core/error.h"
#include "proto/pronghorn.grpc.pb.h"

namespace pronghorn::control {

using learner::ControlAnswer;
using learner::ControlReply;
using learner::ControlRequest;
namespace {

using grpc::CallbackServerContext;
using grpc::StatusCode;

// Every call is answered by a callback, never by a thread that waits:
// status calls at once, steering calls when the learner's loop has carried
// them out (ControlAnswer), status streams by StatusStreams. So no number of
// open streams or slow calls can keep the owner's `stop` from getting through.
class LearnerService final : public v1::Learner::CallbackService {
 public:
  LearnerService(std::string token, bool open_reads, ControlBoard& board)
      : token_(std::move(token)), open_reads_(open_reads), board_(board), streams_(board) {}

  grpc::ServerUnaryReactor* GetStatus(CallbackServerContext* context, const v1::GetStatusRequest*,
                                      v1::Status* reply) override {
    grpc::Status status = authorize(*context, false);
    if (status.ok()) *reply = board_.status();
    return finished(context, status);
  }

  grpc::ServerWriteReactor<v1::Status>* WatchStatus(
      CallbackServerContext* context, const v1::WatchStatusRequest* request) override {
    if (grpc::Status denied = authorize(*context, false); !denied.ok())
      return StatusStreams::refused(denied);
    const double interval = request->interval_s() == 0 ? 1.0 : request->interval_s();
    if (!std::isfinite(interval) || interval < 0.05 || interval > 3600) {
      return StatusStreams::refused(
          {StatusCode::INVALID_ARGUMENT,
           fmt::format("interval_s = {}: expected 0 (1 s) or 0.05 to 3600 seconds",
                       request->interval_s())});
    }
    return streams_.open(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(interval)));
  }

  grpc::ServerUnaryReactor* ScaleActors(CallbackServerContext* context,
                                        const v1::ScaleActorsRequest* request,
                                        v1::ScaleActorsReply* reply) override {
    if (grpc::Status denied = authorize(*context, true); !denied.ok()) {
      return finished(context, denied);
    }
    if (request->count() < 0 || request->count() > kMaxActors) {
      return finished(
          context, {StatusCode::INVALID_ARGUMENT, fmt::format("count = {}: expected 0 to {} actors",
                                                              request->count(), kMaxActors)});
    }
    return carry_out(context,
                     {.kind = ControlRequest::Kind::kScaleActors,
                      .actors = request->count(),
                      .oversubscribe = request->oversubscribe(),
                      .node = request->node()},
                     [reply](const ControlReply& r) {
                       reply->set_previous(static_cast<uint32_t>(r.previous_actors));
                       reply->set_desired(static_cast<uint32_t>(r.actors));
                     });
  }

  grpc::ServerUnaryReactor* SaveCheckpoint(CallbackServerContext* context,
                                           const v1::SaveCheckpointRequest*,
                                           v1::SaveCheckpointReply* reply) override {
    if (grpc::Status denied = authorize(*context, true); !denied.ok()) {
      return finished(context, denied);
    }
    return carry_out(context, {.kind = ControlRequest::Kind::kSaveCheckpoint},
                     [reply](const ControlReply& r) { reply->set_path(r.checkpoint_path); });
  }

  grpc::ServerUnaryReactor* Stop(CallbackServerContext* context, const v1::StopRequest* request,
                                 v1::StopReply* reply) override {
    if (grpc::Status denied = authorize(*context, true); !denied.ok()) {
      return finished(context, denied);
    }
    return carry_out(
        context, {.kind = ControlRequest::Kind::kStop, .graceful = request->graceful()},
        [reply](const ControlReply& r) { reply->set_checkpoint_path(r.checkpoint_path); });
  }

 private:
  static grpc::ServerUnaryReactor* finished(CallbackServerContext* context, grpc::Status status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(std::move(status));
    return reactor;
  }
  // OK, or why this call may not go on (control/grpc_auth.h).
  grpc::Status authorize(const CallbackServerContext& context, bool mutating) const {
    if (!mutating && open_reads_) return grpc::Status::OK;
    return check_bearer(context, token_, "control");
  }

  // Queues `request` for the learner's loop; its reply fills the call's reply
  // (`fill`) and finishes the call. The caller's deadline bounds the wait.
  grpc::ServerUnaryReactor* carry_out(CallbackServerContext* context, const ControlRequest& request,
                                      std::function<void(const ControlReply&)> fill) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    board_.submit(request, ControlAnswer([reactor, fill = std::move(fill)](const ControlReply& r) {
                    fill(r);
                    if (r.job_ending) {
                      reactor->Finish({StatusCode::UNAVAILABLE, r.error});
                    } else if (r.refused) {
                      reactor->Finish({StatusCode::FAILED_PRECONDITION, r.error});
                    } else if (!r.error.empty()) {
                      reactor->Finish({StatusCode::INTERNAL, r.error});
                    } else {
                      reactor->Finish(grpc::Status::OK);
                    }
                  }));
    return reactor;
  }

  const std::string token_;
  const bool open_reads_;
  ControlBoard& board_;
  StatusStreams streams_;
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
  // The standard health service (grpc.health.v1, service ""), for a
  // scheduler's probes: no token, nothing said but SERVING until this server
  // stops. (Process-wide: a server built after this one serves it too.)
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.address, server_credentials(config), &impl_->port);
  builder.RegisterService(&impl_->service);
  answer_unparsed_requests_as_invalid(builder);  // not UNIMPLEMENTED, as gRPC would
  // Requests are a few bytes; a Status is under 1 KiB.
  builder.SetMaxReceiveMessageSize(64 * 1024);
  builder.SetMaxSendMessageSize(1 << 20);
  // gRPC sets SO_REUSEPORT by default: a second job on this port would bind
  // it too and take half the connections (status from the wrong job, `stop`
  // reaching the wrong one).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  impl_->server = builder.BuildAndStart();
  PRONGHORN_CHECK(impl_->server && impl_->port > 0, "server.address = \"", config.address,
                  "\": cannot listen there (another job on that port? port 0 picks a free one)",
                  config.tls_cert.empty() ? "" : ", or the TLS certificate or key is invalid");
  spdlog::info("control plane on {}{} (port {})", config.address,
               config.tls_cert.empty() ? "" : " with TLS", impl_->port);
}

ControlServer::~ControlServer() {
  impl_->board.close();
  impl_->server->GetHealthCheckService()->SetServingStatus(false);
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

int ControlServer::port() const { return impl_->port; }

}  // namespace pronghorn::control
