// The node's unrolls (remote/actor_node.h): the local ring → StreamUnrolls,
// one unroll per credit, and the learner's acks, credits and process count
// back.
//
//   Uploader   one session: a writer thread (credit → take 1 from the ring →
//              UnrollMessage, with how many more wait → release the slot)
//              and a reader thread (acks, credits, processes, job_ended)
//   NodeTally  what became of every unroll the node's actors committed
//
// An unroll acted with weights of another learner incarnation than the
// session's (or too old to be in the version map) is discarded, never sent.
// Sequence numbers count unrolls handed to the stream, 1, 2, …: one that
// went into a Write the stream then failed counts as sent, and the rejoin's
// previous_session_received settles whether it landed.
//
// Threads: the Uploader's own two; its public calls from the node's loop.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "buffer/ring.h"
#include "proto/remote.grpc.pb.h"
#include "remote/node_weights.h"

namespace pronghorn::remote {

// Every unroll committed to the node's ring is acked, lost in flight,
// discarded, or unsent (still in the ring at exit): the four add up.
class NodeTally {
 public:
  // A session ended having sent `sent` unrolls, `acked` of them acked.
  // `received`: its previous_session_received from the next Join (-1: the
  // learner does not know it), or nothing when no Join followed; the
  // learner's count wins over the acks when it knows the session (acks in
  // flight at the cut never arrived), and everything sent beyond it is lost.
  void end_session(uint64_t sent, uint64_t acked, std::optional<int64_t> received);
  void discarded(uint64_t n) { discarded_ += n; }

  uint64_t acked() const { return acked_; }
  uint64_t lost() const { return lost_; }
  uint64_t discarded() const { return discarded_; }

  // "node NAME: unrolls committed C = acked A + lost in flight L + discarded
  // D + unsent U" (tests parse it).
  std::string line(const std::string& node, uint64_t committed, uint64_t unsent) const;
  bool adds_up(uint64_t committed, uint64_t unsent) const {
    return committed == acked_ + lost_ + discarded_ + unsent;
  }

 private:
  uint64_t acked_ = 0, lost_ = 0, discarded_ = 0;
};

struct SessionIds {
  std::string token, session, incarnation;
};

class Uploader {
 public:
  // Starts the stream; sends nothing before `weights_ready` (the session's
  // first whole version in the slab). `alive` is the node's actor count now.
  Uploader(v1::ActorGateway::Stub& stub, const SessionIds& ids, buffer::Ring& ring,
           const LocalWeights& weights, const std::atomic<bool>& weights_ready,
           const std::atomic<int>& alive);
  ~Uploader();  // finish()
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  bool ended() const;      // the stream is over (error, cancel, or the learner ended it)
  bool job_ended() const;  // the learner said the job is over
  uint64_t acked() const;  // cumulative, as the learner last said
  // The process count the learner asked for since the last call, once.
  std::optional<int> wanted_processes();

  struct Result {
    uint64_t sent = 0, acked = 0, discarded = 0;
    bool job_ended = false;
    grpc::Status status;
  };
  // Stops sending, half-closes the stream and reads the learner's replies
  // until it ends it or has acked every unroll sent, for 2 s at most; then
  // cancels what is still open and joins both threads (idempotent).
  Result finish();

 private:
  void write_loop();  // write_unrolls(), then says it is done
  void write_unrolls();
  void read_loop();
  // Waits for a credit; false when the stream is over.
  bool wait_for_credit();

  grpc::ClientContext context_;
  const std::string incarnation_;
  buffer::Ring& ring_;
  const LocalWeights& weights_;
  const std::atomic<bool>& weights_ready_;
  const std::atomic<int>& alive_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::UnrollMessage, v1::UnrollReply>> stream_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t credits_ = 0, sent_ = 0, acked_ = 0, discarded_ = 0;
  std::optional<int> wanted_;  // a count not yet passed on
  int last_wanted_ = -1;
  bool ended_ = false, job_ended_ = false, finishing_ = false, writer_done_ = false;
  std::optional<Result> result_;

  std::thread writer_, reader_;
};

}  // namespace pronghorn::remote
