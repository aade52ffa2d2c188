// What both ends of the actor gateway (proto/remote.proto) agree on beyond
// its messages: the session's metadata key, checksums, chunk and message
// sizes, keepalives, and how a node names the env plugin it loads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "proto/remote.pb.h"

namespace pronghorn::remote {

// The metadata key of StreamUnrolls and StreamWeights naming the session.
inline constexpr const char* kSessionMetadata = "pronghorn-session";

// Bytes of weights per WeightsChunk, at most.
inline constexpr size_t kWeightChunkBytes = size_t{1} << 20;

// A node's name: 1 to 64 of [A-Za-z0-9._-] (it goes into logs, status
// tables and metric labels).
bool valid_node_name(std::string_view name);

// CRC-32 (zlib's) of `bytes` bytes at `data`.
uint32_t crc32_of(const void* data, size_t bytes);

// The largest UnrollMessage for slots of `slot_bytes` (the slot plus room for
// the header), and the largest WeightsChunk: both ends set their limits
// from these.
int unroll_message_limit(uint64_t slot_bytes);
int weights_message_limit();

// HTTP/2 keepalive: a ping every 2 s on an open connection, even idle, and
// the peer counted dead when one goes unanswered for 3 s; so a silently cut
// link ends its streams in about 5 s on both ends.
void set_keepalive(grpc::ChannelArguments& arguments);
void set_keepalive(grpc::ServerBuilder& builder);

// The plugin a node or learner loads from `path`: its file name, the ABI
// version this build loads, and the SHA-256 of its bytes. Throws Error
// naming the path when it cannot be read.
v1::PluginIdentity plugin_identity(const std::string& path);

}  // namespace pronghorn::remote
