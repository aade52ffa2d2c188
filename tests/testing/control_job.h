// A training job for control-plane tests (`pronghorn train` with job_args())
// and the small gRPC helpers those tests share.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "proto/pronghorn.grpc.pb.h"
#include "tests/testing/job.h"

namespace pronghorn::testing {

// A training job on any free ports, trained forever until the test ends it.
struct Job {
  std::string name = "control-test-" + std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::string dir = ::testing::TempDir() + "/" + name;
  pid_t pid = -1;
  std::string address, token;

  // `suffix` tells apart two jobs of one test (name and directory).
  explicit Job(std::vector<std::string> extra = {}, const std::string& suffix = "") {
    name += suffix;
    dir += suffix;
    std::filesystem::remove_all(dir);
    std::vector<std::string> args = job_args(dir, name);
    args.insert(args.end(), extra.begin(), extra.end());
    pid = start_pronghorn(args);
    // server.address is written once the server listens.
    EXPECT_TRUE(wait_for([&] { return std::filesystem::exists(dir + "/server.address"); }));
    std::ifstream(dir + "/server.address") >> address;
    std::ifstream(dir + "/token") >> token;
  }
  ~Job() {
    if (pid > 0 && kill(pid, SIGTERM) == 0) wait_exit(pid);
  }

  std::unique_ptr<v1::Learner::Stub> stub(const std::shared_ptr<grpc::ChannelCredentials>&
                                              credentials = grpc::InsecureChannelCredentials()) {
    return v1::Learner::NewStub(grpc::CreateChannel(address, credentials));
  }
};

// A context with a 10 s deadline and, unless empty, `authorization: Bearer <token>`.
inline std::unique_ptr<grpc::ClientContext> context(const std::string& token = "") {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) c->AddMetadata("authorization", "Bearer " + token);
  return c;
}

inline v1::Status get_status(v1::Learner::Stub& stub) {
  v1::Status s;
  grpc::Status rpc = stub.GetStatus(context().get(), {}, &s);
  EXPECT_TRUE(rpc.ok()) << rpc.error_message();
  return s;
}

}  // namespace pronghorn::testing
