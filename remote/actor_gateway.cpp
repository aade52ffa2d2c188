#include "remote/actor_gateway.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "control/grpc_auth.h"
#include "core/error.h"
#include "proto/remote.grpc.pb.h"
#include "remote/sessions.h"
#include "remote/unroll_stream.h"
#include "remote/weight_streams.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using namespace std::chrono_literals;
using grpc::CallbackServerContext;
using grpc::StatusCode;

// How long end_job() waits for nodes to hear that the job ended, and the
// destructor for streams to close.
constexpr auto kGoodbye = 2s;

// Why a node's plugin is not the job's, or "" when it is.
std::string plugin_difference(const std::optional<v1::PluginIdentity>& job,
                              const v1::PluginIdentity& node) {
  if (!job)
    return fmt::format("this job loads no env plugin; the node offers {}", node.file_name());
  if (node.sha256() != job->sha256()) {
    return fmt::format("env plugin differs: the node's {} has SHA-256 {}, the job's {} has {}",
                       node.file_name(), node.sha256(), job->file_name(), job->sha256());
  }
  if (node.abi_version() != job->abi_version()) {
    return fmt::format("env plugin ABI differs: the node loads version {}, the learner {}",
                       node.abi_version(), job->abi_version());
  }
  return "";
}

std::string session_of(const CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find(kSessionMetadata);
  return found == metadata.end() ? "" : std::string(found->second.data(), found->second.size());
}

// Join and StreamUnrolls typed; StreamWeights raw, so that every node's
// stream writes the same serialised chunks (weight_streams.h).
class Service final : public v1::ActorGateway::WithRawCallbackMethod_StreamWeights<
                          v1::ActorGateway::CallbackService> {
 public:
  Service(const GatewayOptions& options, Sessions& sessions, WeightStreams& weights,
          const buffer::WeightSlab& slab)
      : o_(options), sessions_(sessions), weights_(weights), slab_(slab) {}

  grpc::ServerUnaryReactor* Join(CallbackServerContext* context, const v1::JoinRequest* request,
                                 v1::JoinReply* reply) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(join(*context, *request, *reply));
    return reactor;
  }

  grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply>* StreamUnrolls(
      CallbackServerContext* context) override {
    std::shared_ptr<Session> session;
    if (grpc::Status denied = admit(*context, session); !denied.ok()) {
      return UnrollStream::refused(denied);
    }
    return new UnrollStream(sessions_, session, context->peer());
  }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamWeights(CallbackServerContext* context,
                                                            const grpc::ByteBuffer*) override {
    std::shared_ptr<Session> session;
    if (grpc::Status denied = admit(*context, session); !denied.ok()) {
      return WeightStreams::refused(denied);
    }
    return weights_.open(session->id);
  }

 private:
  grpc::Status join(const CallbackServerContext& context, const v1::JoinRequest& request,
                    v1::JoinReply& reply) {
    if (grpc::Status denied = control::check_bearer(context, o_.token, "actor gateway");
        !denied.ok()) {
      return denied;
    }
    if (!valid_node_name(request.node_name())) {
      return {StatusCode::INVALID_ARGUMENT, "node_name: expected 1 to 64 of [A-Za-z0-9._-]"};
    }
    if (request.version() != o_.version) {
      spdlog::warn("actor gateway: node {} runs Pronghorn {}, refused", request.node_name(),
                   request.version());
      return {StatusCode::FAILED_PRECONDITION,
              fmt::format("version differs: the node runs Pronghorn {}, the learner {}",
                          request.version(), o_.version)};
    }
    if (request.has_plugin()) {
      if (std::string why = plugin_difference(o_.plugin, request.plugin()); !why.empty()) {
        spdlog::warn("actor gateway: node {} refused: {}", request.node_name(), why);
        return {StatusCode::FAILED_PRECONDITION, why};
      }
    }
    const Sessions::Joined joined = sessions_.join(request);
    if (!joined.session) return joined.refused;
    reply.set_config_toml(o_.config_toml);
    reply.set_session(joined.session->id);
    reply.set_job_id(o_.job_id);
    reply.set_incarnation(o_.incarnation);
    reply.set_slot_bytes(sessions_.slot_bytes());
    reply.set_spec_hash(o_.spec_hash);
    reply.set_policy_version(slab_.version());
    reply.set_processes(joined.processes);
    reply.set_previous_session_received(joined.previous_received);
    reply.set_max_credits(o_.credits);
    if (o_.plugin) *reply.mutable_plugin() = *o_.plugin;
    reply.set_env_spaces(o_.env_spaces);
    reply.mutable_env_packages()->insert(o_.env_packages.begin(), o_.env_packages.end());
    spdlog::info("actor node {} joined from {}: session {}, {} processes", request.node_name(),
                 context.peer(), joined.session->id, joined.processes);
    return grpc::Status::OK;
  }

  // The token, and the session the metadata names (current).
  grpc::Status admit(const CallbackServerContext& context, std::shared_ptr<Session>& session) {
    if (grpc::Status denied = control::check_bearer(context, o_.token, "actor gateway");
        !denied.ok()) {
      return denied;
    }
    const std::string id = session_of(context);
    session = sessions_.find(id);
    if (!session) {
      return {StatusCode::FAILED_PRECONDITION,
              fmt::format("session \"{}\" is not open here (ended, replaced, or of another "
                          "learner): join again",
                          id)};
    }
    return grpc::Status::OK;
  }

  const GatewayOptions& o_;
  Sessions& sessions_;
  WeightStreams& weights_;
  const buffer::WeightSlab& slab_;
};

}  // namespace

struct ActorGateway::Impl {
  Impl(GatewayOptions options, buffer::Ring& ring, const buffer::WeightSlab& slab)
      : o(std::move(options)),
        sessions(ring, slab, o.credits, o.max_held_slots, o.default_processes),
        weights(slab, std::chrono::milliseconds(kWeightsIntervalMs)),
        service(o, sessions, weights, slab) {}
  const GatewayOptions o;
  Sessions sessions;
  WeightStreams weights;
  Service service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  bool ended = false;
};

ActorGateway::ActorGateway(GatewayOptions options, buffer::Ring& ring,
                           const buffer::WeightSlab& slab)
    : impl_(std::make_unique<Impl>(std::move(options), ring, slab)) {
  const GatewayOptions& o = impl_->o;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.address, control::server_credentials(o.tls), &impl_->port);
  builder.RegisterService(&impl_->service);
  builder.SetMaxReceiveMessageSize(unroll_message_limit(impl_->sessions.slot_bytes()));
  builder.SetMaxSendMessageSize(weights_message_limit());
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT,
                             0);  // as the control plane: one job per port
  set_keepalive(builder);
  impl_->server = builder.BuildAndStart();
  PRONGHORN_CHECK(impl_->server && impl_->port > 0, "remote.address = \"", o.address,
                  "\": cannot listen there (another job on that port? port 0 picks a free one)");
  spdlog::info("actor gateway on {}{} (port {}): actor-only nodes join there", o.address,
               o.tls.tls_cert.empty() ? "" : " with TLS", impl_->port);
}

ActorGateway::~ActorGateway() {
  if (!impl_->ended) {
    const grpc::Status going(StatusCode::UNAVAILABLE, "the learner is stopping");
    impl_->weights.end(going);
    impl_->sessions.close_all(going, kGoodbye);
  }
  impl_->server->Shutdown(std::chrono::system_clock::now() + kGoodbye);
}

int ActorGateway::port() const { return impl_->port; }

std::vector<v1::RemoteNode> ActorGateway::nodes() { return impl_->sessions.nodes(); }

bool ActorGateway::scale(const std::string& node, int processes) {
  return impl_->sessions.scale(node, processes);
}

void ActorGateway::end_job() {
  if (impl_->ended) return;
  impl_->ended = true;
  impl_->weights.end(grpc::Status::OK);
  impl_->sessions.end_job(kGoodbye);
}

uint64_t ActorGateway::committed() const { return impl_->sessions.committed(); }

std::string ActorGateway::address() const {
  const std::string& configured = impl_->o.address;
  return configured.substr(0, configured.rfind(':') + 1) + std::to_string(impl_->port);
}

}  // namespace pronghorn::remote
