// NcclCollective: the unique-id exchange, the polled non-blocking init, and
// every call's launch-then-poll with a deadline and an abort (see
// nccl_collective.h). Includes neither NCCL nor CUDA: it talks to NcclApi.
#include "distributed/nccl_collective.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

namespace pronghorn::distributed {
namespace {

using detail::concat;

// Waiting for a GPU collective: first look again soon (small all-reduces
// finish in tens of microseconds), then settle at 1 ms, which costs nothing
// against a deadline of seconds and keeps the core free.
constexpr std::chrono::microseconds kFirstPause{100};
constexpr std::chrono::microseconds kLongestPause{1000};

// Calls `step` until it returns other than kPending or `deadline` has passed
// (then the last kPending), sleeping between calls.
template <typename Step>
NcclStatus poll_until(std::chrono::steady_clock::time_point deadline, Step step) {
  std::chrono::microseconds pause = kFirstPause;
  for (;;) {
    NcclStatus status = step();
    if (!status.is_pending() || std::chrono::steady_clock::now() >= deadline) return status;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

// "5 s", "0.25 s".
std::string seconds_text(std::chrono::milliseconds duration) {
  return concat(static_cast<double>(duration.count()) / 1000.0, " s");
}

}  // namespace

NcclCollective::NcclCollective(std::unique_ptr<NcclApi> api, int rank, int world_size,
                               KeyValueStore& store, std::chrono::milliseconds timeout,
                               std::function<std::string()> lost_peers)
    : api_(std::move(api)),
      rank_(rank),
      world_size_(world_size),
      timeout_(timeout),
      lost_peers_(std::move(lost_peers)) {
  PRONGHORN_CHECK(api_ != nullptr, "NcclCollective: no NcclApi given");
  PRONGHORN_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "NcclCollective: rank ", rank,
                  " is not in a world of ", world_size);
  PRONGHORN_CHECK(timeout.count() > 0, "NcclCollective: the timeout must be positive, got ",
                  timeout.count(), " ms");
  try {
    barrier_word_ = static_cast<int64_t*>(api_->allocate_device(sizeof(int64_t)));
    init_communicator(exchange_unique_id(store));
  } catch (...) {
    // The destructor does not run for a constructor that throws: free here.
    // A communicator that came up halfway is aborted, not finalized: its
    // peers may never arrive.
    std::lock_guard lock(mutex_);
    if (comm_ != nullptr && !aborted_) abort_locked();
    if (barrier_word_ != nullptr) api_->free_device(barrier_word_);
    throw;
  }
}

NcclCollective::~NcclCollective() {
  std::lock_guard lock(mutex_);
  if (comm_ != nullptr && !aborted_) {
    // Finalize waits for every peer to quiesce; one that is gone must not
    // hold this destructor past the deadline, so abort instead then.
    NcclStatus finalized = api_->finalize_comm(comm_);
    if (finalized.is_pending()) {
      finalized = poll_until(Clock::now() + timeout_, [&] { return api_->comm_status(comm_); });
    }
    if (finalized.is_done()) {
      api_->destroy_comm(comm_);
    } else {
      api_->abort_comm(comm_);
    }
    comm_ = nullptr;
  }
  if (barrier_word_ != nullptr) api_->free_device(barrier_word_);
}

std::string NcclCollective::prefix() const {
  return concat("NCCL rank ", rank_, " of ", world_size_, ": ");
}

NcclUniqueId NcclCollective::exchange_unique_id(KeyValueStore& store) {
  NcclUniqueId id{};
  if (rank_ == 0) {
    id = api_->make_unique_id();
    store.set(kNcclUniqueIdKey, std::string(reinterpret_cast<const char*>(id.data()), id.size()));
    return id;
  }
  std::string value;
  try {
    value = store.get(kNcclUniqueIdKey, timeout_);
  } catch (const PeerLost& e) {
    throw PeerLost(concat(prefix(), "rank 0's unique id did not arrive: ", e.what()));
  }
  PRONGHORN_CHECK(value.size() == id.size(), prefix(), "the store's \"", kNcclUniqueIdKey,
                  "\" holds ", value.size(), " bytes, not an NCCL unique id of ", id.size());
  std::memcpy(id.data(), value.data(), id.size());
  return id;
}

void NcclCollective::init_communicator(const NcclUniqueId& id) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  {
    std::lock_guard lock(mutex_);
    NcclStatus started = api_->init_comm(id, world_size_, rank_, &comm_);
    if (started.is_failed()) {
      fail_locked(concat(prefix(), "communicator init failed: ", started.error));
    }
  }
  wait_until_done("communicator init", "a peer did not join or its link is down", deadline,
                  [&] { return api_->comm_status(comm_); });
}

void NcclCollective::all_reduce_sum(std::span<float> data) {
  run(concat("all-reduce of ", data.size(), " floats"),
      [&] { return api_->all_reduce_sum(comm_, data.data(), data.size()); });
}

void NcclCollective::all_reduce_sum(std::span<int64_t> data) {
  run(concat("all-reduce of ", data.size(), " int64s"),
      [&] { return api_->all_reduce_sum(comm_, data.data(), data.size()); });
}

void NcclCollective::broadcast(std::span<std::byte> data, int root) {
  PRONGHORN_CHECK(root >= 0 && root < world_size_, prefix(), "broadcast from rank ", root,
                  ", which is not in a world of ", world_size_);
  run(concat("broadcast of ", data.size(), " bytes from rank ", root),
      [&] { return api_->broadcast(comm_, data.data(), data.size(), root); });
}

void NcclCollective::barrier() {
  // The word's value is meaningless: only that every rank took part.
  run("barrier", [&] { return api_->all_reduce_sum(comm_, barrier_word_, 1); });
}

void NcclCollective::abort() {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  abort_cause_ = "abort() was called";
  abort_locked();
}

template <typename Launch>
void NcclCollective::run(const std::string& what, Launch launch) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  {
    std::lock_guard lock(mutex_);
    if (aborted_) throw_aborted_locked();
    NcclStatus launched = launch();
    if (launched.is_failed()) fail_locked(concat(prefix(), what, " failed: ", launched.error));
  }
  // The communicator's async error first: while a peer is lost, the stream
  // never finishes, and only NCCL's error says why.
  wait_until_done(what, "a peer stalled or its link is down", deadline, [&] {
    NcclStatus comm = api_->comm_status(comm_);
    return comm.is_done() ? api_->stream_status() : comm;
  });
}

template <typename Status>
void NcclCollective::wait_until_done(const std::string& what, const char* likely_cause,
                                     Clock::time_point deadline, Status status) {
  NcclStatus last = poll_until(deadline, [&] {
    std::lock_guard lock(mutex_);
    if (aborted_) throw_aborted_locked();
    return status();
  });
  std::lock_guard lock(mutex_);
  if (aborted_) throw_aborted_locked();  // aborted from another thread after the last poll
  if (last.is_failed()) fail_locked(concat(prefix(), what, " failed: ", last.error));
  if (last.is_pending()) {
    fail_locked(concat(prefix(), what, " did not complete within ", seconds_text(timeout_), ": ",
                       likely_cause));
  }
}

void NcclCollective::fail_locked(const std::string& cause) {
  abort_cause_ = cause;
  if (comm_ != nullptr) {
    abort_locked();
  } else {
    aborted_ = true;  // init never handed back a communicator: nothing to abort
  }
  if (lost_peers_) throw PeerLost(concat(cause, "; lost: ", lost_peers_()));
  throw PeerLost(cause);
}

void NcclCollective::throw_aborted_locked() const {
  throw PeerLost(concat(prefix(), "the communicator was aborted earlier (", abort_cause_, ")"));
}

void NcclCollective::abort_locked() {
  aborted_ = true;
  if (comm_ != nullptr) api_->abort_comm(comm_);
  comm_ = nullptr;  // ncclCommAbort frees it
}

std::unique_ptr<Collective> make_nccl_collective(int rank, int world_size, KeyValueStore& store,
                                                 std::chrono::milliseconds timeout,
                                                 std::function<std::string()> lost_peers) {
#ifdef PRONGHORN_WITH_CUDA
  return std::make_unique<NcclCollective>(make_cuda_nccl_api(), rank, world_size, store, timeout,
                                          std::move(lost_peers));
#else
  (void)rank, (void)world_size, (void)store, (void)timeout, (void)lost_peers;
  throw UsageError(
      "distributed.backend = \"nccl\": this build has no CUDA (nvcc was not found when it was "
      "configured, or PRONGHORN_CUDA=OFF); use \"gloo\" or \"auto\"");
#endif
}

}  // namespace pronghorn::distributed
