// The NCCL implementation of Collective (docs/architecture.md §2), for
// learners on CUDA: NCCL called directly through NcclApi, no LibTorch.
//
// unique id (rank 0 → store "nccl/unique_id" → ranks > 0) → non-blocking
// communicator init, polled → per call: launch, then poll the communicator's
// async error and the stream until done, or until the deadline → abort.
//
// Deadlines: the store get, the init and every call each get `timeout`. A
// call that fails (NCCL's async error: a peer died, a network error) or runs
// past its deadline (a peer stopped, a link cut) aborts the communicator and
// throws PeerLost naming the cause; every later call throws PeerLost at once.
// Waiting sleeps between polls (100 µs, backing off to 1 ms), never spins.
//
// Buffers are device memory on the device this collective was made on, and
// must hold their final values when the call starts: NCCL runs on its own
// stream, so a caller whose data comes from another stream (LibTorch's)
// synchronizes that stream first. Each call returns once the result is in
// place (the stream has finished it).
// Threads: one caller at a time; abort() may also come from another thread
// (a watchdog), and the pending call then throws PeerLost.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "distributed/collective.h"
#include "distributed/key_value.h"
#include "distributed/nccl_api.h"

namespace pronghorn::distributed {

// The store key the unique id travels under (the store prefixes it per run
// and per attempt).
inline constexpr const char* kNcclUniqueIdKey = "nccl/unique_id";

class NcclCollective final : public Collective {
 public:
  // Exchanges the unique id through `store` (used only here) and brings the
  // communicator up. Throws PeerLost when the id does not arrive, the init
  // fails or does not complete within `timeout`; Error on a malformed id.
  // `lost_peers`, when given, names the rank lost after a failure
  // (Rendezvous::lost_peers), as the Gloo collective does.
  NcclCollective(std::unique_ptr<NcclApi> api, int rank, int world_size, KeyValueStore& store,
                 std::chrono::milliseconds timeout,
                 std::function<std::string()> lost_peers = nullptr);
  // Ends a healthy communicator in order (finalize, within `timeout`, else
  // abort); an aborted one is already gone.
  ~NcclCollective() override;
  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string backend() const override { return "nccl"; }

  void all_reduce_sum(std::span<float> data) override;
  void all_reduce_sum(std::span<int64_t> data) override;
  void broadcast(std::span<std::byte> data, int root) override;
  // An all-reduce of one device word: NCCL has no barrier of its own.
  void barrier() override;
  void abort() override;

 private:
  using Clock = std::chrono::steady_clock;

  NcclUniqueId exchange_unique_id(KeyValueStore& store);
  void init_communicator(const NcclUniqueId& id);
  // Launches `launch` (a call on api_) under the lock, then polls until the
  // stream has finished it; throws PeerLost as described above. `what` names
  // the call in messages ("all-reduce of 1024 floats").
  template <typename Launch>
  void run(const std::string& what, Launch launch);
  // Polls `status` (called under the lock) until it is not kPending; on
  // kFailed, past `deadline` (the message then names `likely_cause`) or once
  // aborted, aborts and throws PeerLost.
  template <typename Status>
  void wait_until_done(const std::string& what, const char* likely_cause,
                       Clock::time_point deadline, Status status);
  // The *_locked members expect mutex_ held.
  // Records `cause`, aborts the communicator, throws PeerLost(cause).
  [[noreturn]] void fail_locked(const std::string& cause);
  [[noreturn]] void throw_aborted_locked() const;
  void abort_locked();
  std::string prefix() const;

  std::unique_ptr<NcclApi> api_;
  const int rank_;
  const int world_size_;
  const std::chrono::milliseconds timeout_;
  const std::function<std::string()> lost_peers_;
  // Guards comm_ against abort() from another thread while a call polls it.
  std::mutex mutex_;
  NcclCommHandle comm_ = nullptr;
  std::atomic<bool> aborted_{false};
  std::string abort_cause_;          // what aborted it, repeated by later calls
  int64_t* barrier_word_ = nullptr;  // device memory
};

// The collective for distributed.backend = "nccl": the CUDA NcclApi on the
// current device. Throws UsageError naming why where it cannot be had: the
// build has no CUDA, or no CUDA device is usable.
std::unique_ptr<Collective> make_nccl_collective(int rank, int world_size, KeyValueStore& store,
                                                 std::chrono::milliseconds timeout,
                                                 std::function<std::string()> lost_peers = nullptr);

}  // namespace pronghorn::distributed
