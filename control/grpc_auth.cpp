#include "control/grpc_auth.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/files.h"
#include "core/token.h"

namespace pronghorn::control {
namespace {

std::string read_pem(const std::string& key, const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const Error&) {
    throw Error(fmt::format("{} = \"{}\": cannot read the file", key, path));
  }
  PRONGHORN_CHECK(text.find("-----BEGIN ") != std::string::npos, key, " = \"", path,
                  "\": not a PEM file");
  return text;
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> server_credentials(const ServerConfig& c) {
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

std::shared_ptr<grpc::ChannelCredentials> client_credentials(const std::string& ca,
                                                             const std::string& cert,
                                                             const std::string& key) {
  if (ca.empty()) {
    if (!cert.empty()) throw UsageError("--tls-cert needs --tls-ca (the server's CA)");
    return grpc::InsecureChannelCredentials();
  }
  if (cert.empty() != key.empty())
    throw UsageError("--tls-cert and --tls-key: give both or neither");
  const auto option_file = [](const std::string& option, const std::string& path) {
    try {
      return read_file(path);
    } catch (const Error&) {
      throw UsageError(option + " " + path + ": cannot read the file");
    }
  };
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = option_file("--tls-ca", ca);
  if (!cert.empty()) {
    ssl.pem_cert_chain = option_file("--tls-cert", cert);
    ssl.pem_private_key = option_file("--tls-key", key);
  }
  return grpc::SslCredentials(ssl);
}

grpc::Status check_bearer(const grpc::CallbackServerContext& context, const std::string& token,
                          std::string_view service) {
  const auto& metadata = context.client_metadata();
  const auto found = metadata.find("authorization");
  if (found == metadata.end()) {
    spdlog::warn("{}: {} without a token refused", service, context.peer());
    return {grpc::StatusCode::UNAUTHENTICATED,
            "this call needs the job's token: metadata `authorization: Bearer <token>` "
            "(pronghorn --token-file)"};
  }
  const std::string_view value(found->second.data(), found->second.size());
  constexpr std::string_view kScheme = "Bearer ";
  if (!value.starts_with(kScheme)) {
    return {grpc::StatusCode::UNAUTHENTICATED, "authorization metadata: expected `Bearer <token>`"};
  }
  if (!tokens_equal(value.substr(kScheme.size()), token)) {
    spdlog::warn("{}: {} with a wrong token refused", service, context.peer());
    return {grpc::StatusCode::PERMISSION_DENIED, "wrong token"};
  }
  return grpc::Status::OK;
}

}  // namespace pronghorn::control
