// What every gRPC service of a learner checks the same way (the control
// plane, control/control_server.h, and the actor gateway,
// remote/actor_gateway.h): the server's TLS credentials from server.tls_*,
// and the bearer token a call carries.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/config.h"

namespace pronghorn::control {

// TLS (mutual when tls_client_ca is set) from the PEM files `config` names,
// else plaintext. Throws Error naming the key and the file that cannot be
// read or is not PEM.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const ServerConfig& config);

// A client's: TLS with the PEM CA `ca` (and a client certificate when
// `cert` and `key` are set), else plaintext. The paths are those of the
// --tls-ca, --tls-cert and --tls-key options; a missing or unreadable one is a
// UsageError naming the option.
std::shared_ptr<grpc::ChannelCredentials> client_credentials(const std::string& ca,
                                                             const std::string& cert,
                                                             const std::string& key);

// OK when the call carries `authorization: Bearer <token>` with the job's
// `token` (compared in constant time); UNAUTHENTICATED without one,
// PERMISSION_DENIED with a wrong one. `service` names the refuser in the
// warning it logs.
grpc::Status check_bearer(const grpc::CallbackServerContext& context, const std::string& token,
                          std::string_view service);

}  // namespace pronghorn::control
