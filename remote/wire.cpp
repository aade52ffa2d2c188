#include "remote/wire.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "core/error.h"
#include "envs/pronghorn_env.h"

namespace pronghorn::remote {
namespace {

constexpr int kHeaderRoom = 4096;  // an UnrollMessage's or WeightsChunk's fields but the bytes
constexpr int kKeepaliveTimeMs = 2000;
constexpr int kKeepaliveTimeoutMs = 3000;

}  // namespace

bool valid_node_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

uint32_t crc32_of(const void* data, size_t bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {  // zlib takes a uInt length: feed it in pieces
    const auto piece = static_cast<uInt>(std::min<size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, piece);
    p += piece;
    bytes -= piece;
  }
  return static_cast<uint32_t>(crc);
}

int unroll_message_limit(uint64_t slot_bytes) {
  PRONGHORN_CHECK(slot_bytes < static_cast<uint64_t>(std::numeric_limits<int>::max() - kHeaderRoom),
                  "an unroll slot of ", slot_bytes, " bytes is too large for one gRPC message");
  return static_cast<int>(slot_bytes) + kHeaderRoom;
}

int weights_message_limit() { return static_cast<int>(kWeightChunkBytes) + kHeaderRoom; }

void set_keepalive(grpc::ChannelArguments& arguments) {
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
}

void set_keepalive(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Accept the nodes' pings as often as they send them (the default counts
  // pings more often than every 5 minutes as abuse and closes the link).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             kKeepaliveTimeMs / 2);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
}

v1::PluginIdentity plugin_identity(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  PRONGHORN_CHECK(in.good(), "env plugin ", path, ": cannot read the file");
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  &EVP_MD_CTX_free);
  PRONGHORN_CHECK(context && EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr) == 1,
                  "SHA-256: cannot start a digest");
  std::vector<char> buffer(1 << 16);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(context.get(), buffer.data(), in.gcount());
  }
  PRONGHORN_CHECK(in.eof(), "env plugin ", path, ": read failed");
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  std::string hex;
  for (unsigned i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  v1::PluginIdentity identity;
  identity.set_file_name(std::filesystem::path(path).filename().string());
  identity.set_abi_version(PRONGHORN_ENV_ABI_VERSION);
  identity.set_sha256(hex);
  return identity;
}

}  // namespace pronghorn::remote
