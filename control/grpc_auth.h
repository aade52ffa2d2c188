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

// OK when the call carries `authorization: Bearer <token>` with the job's
// `token` (compared in constant time); UNAUTHENTICATED without one,
// PERMISSION_DENIED with a wrong one. `service` names the refuser in the
// warning it logs.
grpc::Status check_bearer(const grpc::CallbackServerContext& context, const std::string& token,
                          std::string_view service);

}  // namespace pronghorn::control
