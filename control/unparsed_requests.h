// Requests whose bytes do not parse as their method's message. gRPC's
// callback API answers them UNIMPLEMENTED with no message, as if the method
// did not exist (include/grpcpp/impl/codegen/server_callback_handlers.h: a
// failed deserialization leaves no reactor, and the call is failed as
// unimplemented). A client then looks for a version mismatch instead of its
// own bytes. This turns that answer into INVALID_ARGUMENT naming the method.
#pragma once

#include <grpcpp/grpcpp.h>

namespace pronghorn::control {

// Installs the interceptor on a server being built (every method of it).
void answer_unparsed_requests_as_invalid(grpc::ServerBuilder& builder);

}  // namespace pronghorn::control
