// How the learners of one job find each other (docs/architecture.md §2).
// Rank 0 hosts a c10d TCPStore at distributed.rendezvous; every rank connects
// to it. Keys live under pronghorn/<run>/<incarnation>/, where the incarnation
// is a random id rank 0 draws at each start: a rank left over from an earlier
// attempt waits on keys nobody writes and times out instead of joining.
//
// Before any weights or gradients move, the constructor:
// 1. proves the job's token both ways: rank r answers rank 0's nonce with an
//    HMAC under the token and rank 0 answers rank r's (hmac.h); the store
//    itself authenticates nobody, so its port is cluster-internal;
// 2. claims the rank (a second process with the same rank is refused).
// agree() then compares what must be equal on every rank (the config, the
// unroll spec, the model's size, the backend) and names the first
// difference. Both throw UsageError on every rank (exit 2): rank 0 publishes
// one verdict that every rank reads.
//
// A heartbeat thread writes this rank's beat into the store every second; when
// a collective fails, lost_peers() says which ranks went quiet, so the job's
// last line names the rank that was lost.
// Threads: the caller's, plus the heartbeat's own connection.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>
#include <vector>

#include "distributed/facts.h"
#include "distributed/key_value.h"

namespace pronghorn::distributed {

struct RendezvousOptions {
  int rank = 0;
  int world_size = 1;
  std::string host;  // rank 0's store; rank 0 binds every interface
  int port = 0;      // 0 on rank 0: a free port (port() tells which)
  std::string run_name;
  // The job's token, every rank the same; read once rank 0 is there (on a
  // shared filesystem, rank 0 writes it into the run directory first).
  std::function<std::string()> token;
  std::chrono::milliseconds rendezvous_timeout{300'000};  // for every rank to arrive
  std::chrono::milliseconds timeout{60'000};              // for a store call once all are there
  // Rank 0: called with the store's port once it listens, before waiting for
  // the others (a port of 0 is known only then).
  std::function<void(int port)> on_listening;
};

// A rank that left on an error a retry will not fix, as it reported it.
struct PeerFailure {
  int rank = 0;
  int exit_code = 1;
  std::string line;
};

class Rendezvous : public KeyValueStore {
 public:
  // Connects (rank 0 first starts the store) and completes the handshake.
  // Throws UsageError for a refused token or a rank claimed twice, PeerLost
  // when the others do not arrive within rendezvous_timeout.
  explicit Rendezvous(const RendezvousOptions& options);
  ~Rendezvous() override;

  int rank() const { return o_.rank; }
  int world_size() const { return o_.world_size; }
  int port() const;  // the store's port (the bound one on rank 0)
  const std::string& incarnation() const { return incarnation_; }

  // Throws UsageError("rank R: NAME differs (rank 0: A; rank R: B)") on every
  // rank when any rank's facts differ from rank 0's.
  void agree(const Facts& facts);

  // This rank's `name` = value, and another rank's (waiting up to timeout).
  void publish(const std::string& name, const std::string& value);
  std::string read(int rank, const std::string& name);

  // KeyValueStore: keys under this job's prefix.
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;

  // The store under this job's prefix and `sub` (c10d process groups take one).
  c10::intrusive_ptr<c10d::Store> prefixed(const std::string& sub) const;

  // After a failed collective: "rank 1", "ranks 1, 2", "rank 0 (its
  // rendezvous store does not answer)", "rank 1, which failed: <its line>"
  // (see report_failure; then peer_failure() has it), or "a peer" when
  // nobody looks quiet. At most 3.5 s.
  std::string lost_peers();

  // This rank leaves on an error a retry will not fix (exit 1 or 2): says so
  // in the store (at most 1.5 s), so that the others end with its reason and
  // code instead of a lost peer's 75. They look once their collective fails:
  // close this rank's side, then (rank 0, whose store leaves with it)
  // wait_failure_read(), at most 5 s.
  void report_failure(int exit_code, const std::string& line);
  void wait_failure_read();
  // What lost_peers() found another rank reported, if anything.
  const std::optional<PeerFailure>& peer_failure() const { return peer_failure_; }

 private:
  void handshake();
  void publish_verdict(const std::string& stage, const std::string& verdict);
  void read_verdict(const std::string& stage, std::chrono::milliseconds timeout);
  void start_heartbeat();

  RendezvousOptions o_;
  c10::intrusive_ptr<c10d::Store> root_;  // the TCPStore, unprefixed
  c10::intrusive_ptr<c10d::Store> job_;   // pronghorn/<run>/<incarnation>/
  std::string incarnation_;
  std::string token_;
  std::optional<PeerFailure> peer_failure_;
  struct Heartbeat {
    std::atomic<bool> stop{false};
    std::promise<void> done;
  };
  std::shared_ptr<Heartbeat> heartbeat_;
};

}  // namespace pronghorn::distributed
