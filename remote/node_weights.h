// The node's weights (remote/actor_node.h): StreamWeights chunks → one
// whole, verified version → the node's local slab, and which learner
// version each local slab version is.
//
//   WeightAssembler   chunks of one version, in order → the whole vector, or refused
//   VersionMap        local slab version → (learner incarnation, learner version)
//   LocalWeights      the slab (made at the first version: its size is the weights')
//                     and the map, behind one mutex
//   WeightsReceiver   one session's StreamWeights on a thread of its own
//
// A version is published only whole: every chunk in order from offset 0,
// exactly total_bytes, and its CRC-32 equal to the chunks' checksum. A short,
// reordered or corrupt version is dropped and counted; the slab keeps the
// version it had.
//
// Threads: WeightAssembler and VersionMap belong to one thread each;
// LocalWeights is shared by the receiver (publish), the uploader (look-ups)
// and the node's loop (has_weights).
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "buffer/weight_slab.h"
#include "proto/remote.grpc.pb.h"

namespace pronghorn::remote {

class WeightAssembler {
 public:
  enum class Result { kPartial, kComplete, kRefused };
  // A version claiming more than this many bytes is refused before any is kept.
  static constexpr uint64_t kMaxBytes = uint64_t{8} << 30;

  // Takes the next chunk. kComplete: a whole, verified version is ready
  // (take() it). kRefused: the version this chunk belongs to is dropped
  // (why() says how); the chunks after it are refused too until one starts
  // a version at offset 0.
  Result add(const v1::WeightsChunk& chunk);

  // The version add() completed, its parameters [total_bytes / 4].
  uint64_t version() const { return version_; }
  std::vector<float> take() { return std::move(params_); }

  const std::string& why() const { return why_; }
  uint64_t refused() const { return refused_; }

 private:
  Result refuse(std::string why);

  bool assembling_ = false;
  uint64_t version_ = 0, total_ = 0, received_ = 0;
  uint32_t checksum_ = 0;
  std::vector<float> params_;
  std::string why_;
  uint64_t refused_ = 0;  // versions dropped
};

// Which learner version a local slab version is.
struct LearnerVersion {
  std::string incarnation;
  uint64_t version = 0;
  bool operator==(const LearnerVersion&) const = default;
};

// Local versions 1, 2, … as published; only the newest kKept are kept (an
// unroll acted with an older one is far too stale for any learner).
class VersionMap {
 public:
  static constexpr size_t kKept = 4096;
  void add(uint64_t local, LearnerVersion learner);
  std::optional<LearnerVersion> find(uint64_t local) const;
  std::optional<LearnerVersion> newest() const;
  size_t size() const { return map_.size(); }

 private:
  std::map<uint64_t, LearnerVersion> map_;
};

class LocalWeights {
 public:
  explicit LocalWeights(std::string slab_name) : slab_name_(std::move(slab_name)) {}

  // Publishes a whole version of `incarnation`'s `learner_version`; the
  // first makes the slab, sized to it. Throws UsageError when a later
  // version has another size (the job's model changed under this node's
  // actors).
  void publish(const std::string& incarnation, uint64_t learner_version,
               const std::vector<float>& params);
  std::optional<LearnerVersion> find(uint64_t local) const;
  std::optional<LearnerVersion> newest() const;
  bool has_weights() const { return has_weights_.load(); }
  const std::string& slab_name() const { return slab_name_; }

 private:
  const std::string slab_name_;
  mutable std::mutex mutex_;
  std::unique_ptr<buffer::WeightSlab> slab_;
  VersionMap versions_;
  std::atomic<bool> has_weights_{false};
};

// Reads one session's StreamWeights into `weights` until finish() or the
// stream ends.
class WeightsReceiver {
 public:
  WeightsReceiver(v1::ActorGateway::Stub& stub, const std::string& token,
                  const std::string& session, std::string incarnation, LocalWeights& weights);
  ~WeightsReceiver();  // finish()
  WeightsReceiver(const WeightsReceiver&) = delete;
  WeightsReceiver& operator=(const WeightsReceiver&) = delete;

  // The session's first whole version is in the slab: its unrolls may go.
  bool ready() const { return ready_.load(); }
  const std::atomic<bool>& ready_flag() const { return ready_; }
  bool ended() const { return ended_.load(); }
  // Cancels the stream, joins the thread; the stream's status, and the
  // error that ended it here (a size change) when one did.
  grpc::Status finish();
  const std::string& failure() const { return failure_; }

 private:
  void run();

  grpc::ClientContext context_;
  const std::string incarnation_;
  LocalWeights& weights_;
  std::unique_ptr<grpc::ClientReader<v1::WeightsChunk>> reader_;
  std::atomic<bool> ready_{false}, ended_{false};
  std::string failure_;  // written by the thread, read after join
  std::optional<grpc::Status> status_;
  std::thread thread_;
};

}  // namespace pronghorn::remote
