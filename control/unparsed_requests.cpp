#include "control/unparsed_requests.h"

#include <fmt/format.h>
#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <utility>
#include <vector>

namespace pronghorn::control {
namespace {

namespace x = grpc::experimental;
using Point = x::InterceptionHookPoints;

// One per call: a received message that did not deserialize arrives as a
// null message (POST_RECV_MESSAGE); the UNIMPLEMENTED gRPC then sends for it
// is rewritten on its way out (PRE_SEND_STATUS).
class UnparsedRequest final : public x::Interceptor {
 public:
  explicit UnparsedRequest(x::ServerRpcInfo* info) : info_(info) {}

  void Intercept(x::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(Point::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparsed_ = true;
    }
    if (unparsed_ && methods->QueryInterceptionHookPoint(Point::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(
          {grpc::StatusCode::INVALID_ARGUMENT,
           fmt::format("{}: the request's bytes do not parse as its message", info_->method())});
    }
    methods->Proceed();
  }

 private:
  x::ServerRpcInfo* info_;
  bool unparsed_ = false;
};

class UnparsedRequestFactory final : public x::ServerInterceptorFactoryInterface {
 public:
  x::Interceptor* CreateServerInterceptor(x::ServerRpcInfo* info) override {
    return new UnparsedRequest(info);
  }
};

}  // namespace

void answer_unparsed_requests_as_invalid(grpc::ServerBuilder& builder) {
  std::vector<std::unique_ptr<x::ServerInterceptorFactoryInterface>> creators;
  creators.push_back(std::make_unique<UnparsedRequestFactory>());
  builder.experimental().SetInterceptorCreators(std::move(creators));
}

}  // namespace pronghorn::control
