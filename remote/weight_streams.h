// The StreamWeights streams of the actor gateway (remote/actor_gateway.h):
// each sends the newest weights, then every newer version once it has sent
// the previous one whole — a slow node skips versions, a fast one waits.
//
// One thread of its own (only while a stream is open) waits for the slab to
// move, at most every `interval`, and makes each version once: read from the
// slab, CRC-32, cut into WeightsChunk messages of at most 1 MiB serialised
// into byte buffers, which every stream writes as they are (gRPC shares the
// bytes): the weights are serialised once per version, not once per node.
// Threads: gRPC's callback threads, its own thread; the owner constructs it,
// ends it (end_job or close_all) and destroys it after the server is down.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "buffer/weight_slab.h"

namespace pronghorn::remote {

class WeightStreams {
 public:
  WeightStreams(const buffer::WeightSlab& slab, std::chrono::milliseconds interval);
  ~WeightStreams();  // ends the thread; every stream must be done
  WeightStreams(const WeightStreams&) = delete;
  WeightStreams& operator=(const WeightStreams&) = delete;

  // A stream of the newest weights and every newer version.
  grpc::ServerWriteReactor<grpc::ByteBuffer>* open();
  // A stream that ends at once with `status` (a refused call).
  static grpc::ServerWriteReactor<grpc::ByteBuffer>* refused(const grpc::Status& status);
  // Every stream ends with `status` once its current version is sent (OK:
  // the job ended) or at once (otherwise); new ones are refused.
  void end(const grpc::Status& status);

  // One version, ready to send.
  struct Version {
    uint64_t version = 0;
    std::vector<grpc::ByteBuffer> chunks;
  };

 private:
  class Stream;
  void make_versions();  // the thread
  void forget(Stream* stream);

  const buffer::WeightSlab& slab_;
  const std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::shared_ptr<const Version> newest_;
  std::set<Stream*> streams_;
  std::optional<grpc::Status> end_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pronghorn::remote
