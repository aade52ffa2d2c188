// The actor gateway's book of nodes and their sessions (remote/actor_gateway.h):
// who joined, the ring slots held for each session (its credits), what each
// StreamUnrolls reply must still say, and the thread that claims ring slots
// for sessions short of credit.
//
// One mutex guards it all; nothing is copied and no gRPC call is made while
// it is held: a decision is taken under it (Session::next_action) and
// carried out after (UnrollStream::act).
//
// Accounting: an unroll a node sends is committed to the ring and counted
// (`received`) under the mutex only while its session is current; a session
// superseded by a rejoin, or ended, counts nothing more, so the count a
// rejoin reads (previous_session_received) is exact.
// Threads: gRPC's callback threads, the granter thread, the learner's loop.
#pragma once

#include <grpcpp/support/status.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "buffer/ring.h"
#include "buffer/weight_slab.h"
#include "proto/pronghorn.pb.h"
#include "proto/remote.pb.h"

namespace pronghorn::remote {

class UnrollStream;

// What a stream must do once the mutex is released: write its reply (filled
// under the mutex) or finish with `status`. The stream stays alive until
// then: a write in flight or a Finish not yet called keeps it from OnDone.
enum class StreamAction { kNone, kWrite, kFinish };
struct Poke {
  UnrollStream* stream = nullptr;
  StreamAction action = StreamAction::kNone;
  grpc::Status status;
};
void perform(const Poke& poke);
void perform(const std::vector<Poke>& pokes);

using Clock = std::chrono::steady_clock;

struct Session {
  std::string id, node;
  // Ring slots claimed for this session and not yet filled: its credits.
  std::deque<uint32_t> held;
  uint64_t received = 0;       // unrolls committed to the ring
  uint64_t last_sequence = 0;  // of the last message taken
  uint32_t waiting = 0;        // unrolls the node said were waiting behind its last one
  bool current = true;         // false once superseded, ended, or the job ended
  // The StreamUnrolls of this session while open, and its reply state.
  UnrollStream* stream = nullptr;
  uint32_t credits_untold = 0;         // granted, not yet in a reply
  uint64_t acked_told = 0;             // the last `acked` sent
  uint32_t processes_told = 0;         // the last `processes` sent
  bool writing = false;                // a reply is in flight
  bool end_told = false;               // the reply with job_ended went out
  std::optional<grpc::Status> finish;  // to finish with, once no reply is in flight
  bool finished = false;               // Finish() called
  Clock::time_point joined{};
};

class Sessions {
 public:
  // Names remembered; past it, the longest-gone disconnected node is forgotten.
  static constexpr size_t kMaxNodes = 1024;

  // `credits`: the most ring slots one session holds; `max_held`: all
  // sessions together (0: no cap beyond the ring).
  Sessions(buffer::Ring& ring, const buffer::WeightSlab& slab, uint32_t credits, uint32_t max_held,
           int default_processes);
  // Stops the granter; every session must be over (ActorGateway finishes
  // the streams and shuts the server down first).
  ~Sessions();
  Sessions(const Sessions&) = delete;
  Sessions& operator=(const Sessions&) = delete;

  // A node joins: a new session (a previous one of the same node, or named
  // in `request`, is superseded: its stream is told to finish). Refused
  // while another node of that name is connected and the request does not
  // name its session, past kMaxNodes names, and while the job ends.
  struct Joined {
    std::shared_ptr<Session> session;  // null: refused, and why
    grpc::Status refused;
    uint32_t processes = 0;
    int64_t previous_received = -1;
  };
  Joined join(const v1::JoinRequest& request);

  // The session `id` while current, else nothing.
  std::shared_ptr<Session> find(const std::string& id);

  // StreamUnrolls of `session` opened (`peer` as gRPC names it), or refused
  // (a session already streaming, ended, or the job ending).
  // `poke`: its first reply (the wanted process count).
  grpc::Status open(const std::shared_ptr<Session>& session, UnrollStream* stream,
                    const std::string& peer, Poke& out);
  // One message: checked, copied into a held slot, committed. Not OK: the
  // stream must finish with it.
  grpc::Status take(Session& s, const v1::UnrollMessage& m, Poke& out);
  // The stream's reply went out (`ok`: it was written); what next.
  Poke written(Session& session, bool ok);
  // The stream finishes with `status` (once no reply is in flight).
  Poke finishing(Session& session, const grpc::Status& status);
  // The stream is done: its held slots go back FREE; the node is counted
  // disconnected unless the job ended.
  void closed(Session& session);

  std::vector<v1::RemoteNode> nodes();
  bool scale(const std::string& name, int processes);
  // Every stream tells its node the job ended and finishes; new joins are
  // refused. Waits up to `wait` for the streams to close.
  void end_job(std::chrono::milliseconds wait);
  // Every stream finishes with `status` (the learner is going away); waits
  // up to `wait` for them to close.
  void close_all(const grpc::Status& status, std::chrono::milliseconds wait);
  bool ending() const;
  uint64_t committed() const;
  uint64_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Node {
    std::string session, peer;
    bool connected = false;
    uint32_t alive = 0, desired = 0;
    bool scaled = false;  // desired set by scale(): it wins over the node's own count
    uint64_t unrolls = 0, unrolls_at_rate = 0;
    Clock::time_point last_seen{}, rate_since{};
    uint32_t disconnects = 0, sessions = 0;
    double rate = 0;  // unrolls/s over the last whole second or more
  };
  bool forget_a_node();  // under mutex_: room for a new name; false when none can go
  void grant();          // the granter thread
  uint32_t wanted(const Session& s) const;    // slots `s` should hold now
  std::shared_ptr<Session> wanting_credit();  // under mutex_
  Poke poke(Session& session);                // under mutex_: what the stream does next
  void end_session(Session& session, std::vector<Poke>& pokes);  // under mutex_: not current
  void wait_streams_closed(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds wait);

  buffer::Ring& ring_;
  const buffer::WeightSlab& slab_;
  const uint32_t credits_, max_held_;
  const int default_processes_;
  const uint64_t slot_bytes_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a session wants credit, or a stream closed
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // current ones, by id
  // Ended sessions' node and count of unrolls committed (the newest kept).
  std::map<std::string, std::pair<std::string, uint64_t>> ended_received_;
  std::deque<std::string> ended_order_;
  std::map<std::string, Node> nodes_;  // by name
  size_t open_streams_ = 0;
  uint64_t committed_ = 0;
  uint64_t next_grant_ = 0;  // round robin among sessions wanting credit
  bool ending_ = false, job_ended_ = false, stopping_ = false;
  std::thread granter_;
};

}  // namespace pronghorn::remote
