// TLS on a learner's services, against real jobs: the control plane with
// mutual TLS, and an actor-only node joining the actor gateway, which serves
// with the same server.tls_* (certificates made with the openssl command).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "proto/pronghorn.grpc.pb.h"
#include "tests/testing/control_job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn;
using namespace pronghorn::testing;

// CA, server certificate for 127.0.0.1, and a client certificate, made with
// the openssl command.
struct Certificates {
  std::string dir = ::testing::TempDir() + "/control-test-tls-" + std::to_string(getpid());
  std::string ca() const { return dir + "/ca.pem"; }
  Certificates() {
    std::filesystem::create_directories(dir);
    const std::string d = dir;
    const std::string script =
        "cd " + d +
        " && "
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=test-ca -keyout ca.key "
        "-out ca.pem && "
        "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key "
        "-out server.csr && "
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > san.ext && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
        "-extfile san.ext -out server.pem && "
        "openssl req -newkey rsa:2048 -nodes -subj /CN=client -keyout client.key "
        "-out client.csr && "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 "
        "-out client.pem";
    auto [code, out] = shell(script);
    EXPECT_EQ(code, 0) << out;
  }
};

TEST(ControlTest, MutualTlsRoundTrip) {
  Certificates certs;
  Job job({"--set", "server.tls_cert=" + certs.dir + "/server.pem", "--set",
           "server.tls_key=" + certs.dir + "/server.key", "--set",
           "server.tls_client_ca=" + certs.ca()});
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = slurp(certs.ca());
  options.pem_cert_chain = slurp(certs.dir + "/client.pem");
  options.pem_private_key = slurp(certs.dir + "/client.key");
  auto stub = job.stub(grpc::SslCredentials(options));
  ASSERT_TRUE(wait_for([&] { return get_status(*stub).learner_steps() > 0; }));
  EXPECT_EQ(get_status(*stub).run_name(), job.name);

  v1::Status s;
  EXPECT_FALSE(job.stub()->GetStatus(context().get(), {}, &s).ok()) << "plain text refused";
  grpc::SslCredentialsOptions no_client_cert;
  no_client_cert.pem_root_certs = options.pem_root_certs;
  EXPECT_FALSE(
      job.stub(grpc::SslCredentials(no_client_cert))->GetStatus(context().get(), {}, &s).ok())
      << "a client without a certificate is refused";

  // The CLI over TLS, token from the run directory: stop.
  auto [code, out] =
      shell(std::string(PRONGHORN_BIN) + " stop --run-dir " + job.dir + " --tls-ca " + certs.ca() +
            " --tls-cert " + certs.dir + "/client.pem --tls-key " + certs.dir + "/client.key");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
}

TEST(ControlTest, AnActorOnlyNodeJoinsOverMutualTlsAndPlaintextIsRefused) {
  Certificates certs;
  const std::vector<std::string> tls = {"--set", "server.tls_cert=" + certs.dir + "/server.pem",
                                        "--set", "server.tls_key=" + certs.dir + "/server.key",
                                        "--set", "server.tls_client_ca=" + certs.ca()};
  std::vector<std::string> extra = tls;
  for (const char* s : {"remote.address=127.0.0.1:0", "actor.count=0"}) {
    extra.insert(extra.end(), {"--set", s});
  }
  Job job(extra);
  ASSERT_TRUE(wait_for([&] { return std::filesystem::exists(job.dir + "/remote.address"); }));
  std::string remote;
  std::ifstream(job.dir + "/remote.address") >> remote;
  const std::string node = std::string(PRONGHORN_BIN) + " --log-level warn actor --learner " +
                           remote + " --token-file " + job.dir + "/token --processes 1" +
                           " --give-up-after 5";

  // Plain text against a TLS gateway: no learner answers, the node gives up.
  auto [code, out] = shell(node + " --name plain 2>&1");
  EXPECT_EQ(code, 75) << out;

  const pid_t pid =
      start_pronghorn({"actor", "--learner", remote, "--token-file", job.dir + "/token",
                       "--processes", "1", "--name", "tls1", "--tls-ca", certs.ca(), "--tls-cert",
                       certs.dir + "/client.pem", "--tls-key", certs.dir + "/client.key"});
  StopOnExit node_guard{pid};
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = slurp(certs.ca());
  options.pem_cert_chain = slurp(certs.dir + "/client.pem");
  options.pem_private_key = slurp(certs.dir + "/client.key");
  auto stub = job.stub(grpc::SslCredentials(options));
  // The status's node rows are refreshed every 100 ms, after the steps they fed: wait for both.
  v1::Status s;
  ASSERT_TRUE(wait_for(
      [&] {
        s = get_status(*stub);
        return s.learner_steps() > 0 && s.remote_nodes_size() == 1 &&
               s.remote_nodes(0).unrolls() > 0;
      },
      60s))
      << "the learner trained on nothing from the node: " << s.ShortDebugString();
  EXPECT_EQ(s.remote_nodes(0).name(), "tls1");

  kill(job.pid, SIGTERM);  // a clean stop ends the job: the node leaves with 0
  EXPECT_EQ(wait_exit(job.pid), 0);
  job.pid = -1;
  EXPECT_EQ(wait_exit(pid), 0);
  node_guard.pid = -1;
}

}  // namespace
