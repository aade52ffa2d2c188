// The seam between NcclCollective and NCCL/CUDA (docs/architecture.md §2):
// exactly the calls the collective makes, behind opaque handles, so that the
// unique-id exchange, the deadlines and the abort logic run on the CPU in
// tests against a fake (distributed/testing/fake_nccl_api.h) that stalls or
// fails on cue. The real implementation (nccl_api_cuda.cpp) is compiled only
// where the build has CUDA (PRONGHORN_WITH_CUDA); no NCCL or CUDA header
// comes in through this file.
//
// Nothing here waits: every call returns at once, and "not yet" is a
// NcclStatus of kPending that the caller polls again.
// Threads: one caller at a time per NcclApi object.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace pronghorn::distributed {

// ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES, checked in nccl_api_cuda.cpp):
// rank 0 makes it, the others receive it through the store.
inline constexpr std::size_t kNcclUniqueIdBytes = 128;
using NcclUniqueId = std::array<std::byte, kNcclUniqueIdBytes>;

// An ncclComm_t in the real implementation; whatever a fake likes in a test.
using NcclCommHandle = void*;

// The state of a communicator, a launch, or the stream's queued work.
struct NcclStatus {
  enum class State { kDone, kPending, kFailed };
  State state = State::kDone;
  // When kFailed: what NCCL or CUDA said, e.g. "remote process exited or
  // there was a network error (ncclRemoteError): ...".
  std::string error;

  static NcclStatus done() { return {State::kDone, {}}; }
  static NcclStatus pending() { return {State::kPending, {}}; }
  static NcclStatus failed(std::string error) { return {State::kFailed, std::move(error)}; }
  bool is_done() const { return state == State::kDone; }
  bool is_pending() const { return state == State::kPending; }
  bool is_failed() const { return state == State::kFailed; }
};

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  // ncclGetUniqueId. Throws Error when NCCL cannot make one.
  virtual NcclUniqueId make_unique_id() = 0;

  // ncclCommInitRankConfig with a non-blocking config (blocking = 0): starts
  // this rank's part of a communicator of `world` ranks and returns at once;
  // it is ready when comm_status says kDone. `*comm` is set whenever NCCL
  // handed one back (also on kFailed), and must then be aborted or destroyed.
  virtual NcclStatus init_comm(const NcclUniqueId& id, int world, int rank,
                               NcclCommHandle* comm) = 0;

  // ncclCommGetAsyncError: kPending while an init, a launch or a finalize is
  // still in progress, kFailed once the communicator met an error (a peer
  // lost, a network error), kDone otherwise.
  virtual NcclStatus comm_status(NcclCommHandle comm) = 0;

  // Launch on this API's stream (a non-blocking stream, created with the
  // object on the device that was current then), in place. kDone or kPending
  // (a non-blocking communicator may still be enqueuing: poll comm_status)
  // mean launched; the data is final once stream_status says kDone.
  // `data` is device memory.
  virtual NcclStatus all_reduce_sum(NcclCommHandle comm, float* data, std::size_t count) = 0;
  virtual NcclStatus all_reduce_sum(NcclCommHandle comm, int64_t* data, std::size_t count) = 0;
  virtual NcclStatus broadcast(NcclCommHandle comm, std::byte* data, std::size_t bytes,
                               int root) = 0;

  // cudaStreamQuery of this API's stream: kDone once everything launched on
  // it has finished, kFailed on a CUDA error.
  virtual NcclStatus stream_status() = 0;

  // ncclCommFinalize: starts the orderly end of a healthy communicator (it
  // waits for the peers; poll comm_status until kDone, then destroy).
  virtual NcclStatus finalize_comm(NcclCommHandle comm) = 0;
  // ncclCommDestroy: frees a finalized communicator's local resources.
  virtual void destroy_comm(NcclCommHandle comm) = 0;
  // ncclCommAbort: ends whatever is pending on the device and frees the
  // communicator; it is gone afterwards (never destroy it too).
  virtual void abort_comm(NcclCommHandle comm) = 0;

  // Device memory for the collective's own use (the barrier's one word):
  // cudaMalloc / cudaFree. allocate throws Error when it fails.
  virtual void* allocate_device(std::size_t bytes) = 0;
  virtual void free_device(void* ptr) = 0;
};

// The NCCL/CUDA implementation, on the device current for the calling thread.
// Throws UsageError ("distributed.backend = "nccl": no CUDA device (<CUDA's
// reason>); use "gloo" or "auto"") where no device can be used. Defined only
// in a build with CUDA (PRONGHORN_WITH_CUDA).
std::unique_ptr<NcclApi> make_cuda_nccl_api();

// Makes GPU `local_rank` mod the device count current for this process, so
// that ranks sharing a node take a GPU each (NCCL refuses two ranks on one
// device) and LibTorch's "cuda" means the same one. Returns its index.
// Defined only in a build with CUDA.
int use_local_gpu(int local_rank);

}  // namespace pronghorn::distributed
