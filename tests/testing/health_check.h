// A grpc.health.v1.Health/Check call, as a scheduler's probe makes it,
// without the health proto (Debian's gRPC ships none): the request is
// HealthCheckRequest{service = 1: string}, the reply HealthCheckResponse{
// status = 1: enum, SERVING = 1, NOT_SERVING = 2}.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

namespace pronghorn::testing {

struct HealthAnswer {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  int serving_status = 0;  // 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING
};

inline HealthAnswer health_check(const std::string& address, const std::string& service = "") {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::string request;
  if (!service.empty()) request = std::string("\x0a", 1) + char(service.size()) + service;  // < 128
  grpc::Slice slice(request);
  grpc::ByteBuffer in(&slice, 1);
  grpc::ByteBuffer out;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", {}, &in, &out,
                 [&](const grpc::Status& s) { done.set_value(s); });
  std::future<grpc::Status> finished = done.get_future();
  if (finished.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    context.TryCancel();
    finished.wait();  // a cancelled call completes at once
    return {};
  }
  HealthAnswer answer{finished.get().error_code(), 0};
  std::vector<grpc::Slice> slices;
  if (answer.code == grpc::StatusCode::OK && out.Dump(&slices).ok()) {
    std::string bytes;
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    if (bytes.size() >= 2 && bytes[0] == '\x08') answer.serving_status = bytes[1];
  }
  return answer;
}

}  // namespace pronghorn::testing
