// NcclApi over the real NCCL and CUDA runtime (nccl_api.h). Compiled only in
// a build with CUDA; includes no LibTorch, like the kernels' .cu files. On a
// machine without a usable GPU the constructor fails with CUDA's reason
// ("CUDA driver version is insufficient for CUDA runtime version", "no CUDA-
// capable device is detected") as a UsageError.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "distributed/nccl_api.h"

namespace pronghorn::distributed {
namespace {

using detail::concat;

static_assert(NCCL_UNIQUE_ID_BYTES == kNcclUniqueIdBytes);
static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId));

ncclComm_t as_comm(NcclCommHandle comm) { return static_cast<ncclComm_t>(comm); }

// NCCL's text for `result`, with the communicator's last error when it has
// one (it names the peer or the system call that failed).
std::string nccl_error_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && detail[0] != '\0') text += concat(": ", detail);
  return text;
}

NcclStatus from_nccl(ncclResult_t result, ncclComm_t comm) {
  if (result == ncclSuccess) return NcclStatus::done();
  if (result == ncclInProgress) return NcclStatus::pending();
  return NcclStatus::failed(nccl_error_text(result, comm));
}

class CudaNcclApi final : public NcclApi {
 public:
  CudaNcclApi() {
    int devices = 0;
    cudaError_t status = cudaGetDeviceCount(&devices);
    if (status == cudaSuccess && devices == 0) status = cudaErrorNoDevice;
    if (status == cudaSuccess) {
      status = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    }
    if (status != cudaSuccess) {
      throw UsageError(concat("distributed.backend = \"nccl\": no CUDA device (",
                              cudaGetErrorString(status), "); use \"gloo\" or \"auto\""));
    }
  }
  ~CudaNcclApi() override { cudaStreamDestroy(stream_); }
  CudaNcclApi(const CudaNcclApi&) = delete;
  CudaNcclApi& operator=(const CudaNcclApi&) = delete;

  NcclUniqueId make_unique_id() override {
    ncclUniqueId raw;
    ncclResult_t result = ncclGetUniqueId(&raw);
    PRONGHORN_CHECK(result == ncclSuccess,
                    "NCCL could not make a unique id: ", nccl_error_text(result, nullptr));
    NcclUniqueId id;
    std::memcpy(id.data(), raw.internal, id.size());
    return id;
  }

  NcclStatus init_comm(const NcclUniqueId& id, int world, int rank, NcclCommHandle* comm) override {
    ncclUniqueId raw;
    std::memcpy(raw.internal, id.data(), id.size());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // return at once; NcclCollective polls with its deadline
    ncclComm_t created = nullptr;
    ncclResult_t result = ncclCommInitRankConfig(&created, world, raw, rank, &config);
    *comm = created;
    return from_nccl(result, created);
  }

  NcclStatus comm_status(NcclCommHandle comm) override {
    ncclResult_t async = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(as_comm(comm), &async);
    if (result != ncclSuccess) return NcclStatus::failed(nccl_error_text(result, as_comm(comm)));
    return from_nccl(async, as_comm(comm));
  }

  NcclStatus all_reduce_sum(NcclCommHandle comm, float* data, std::size_t count) override {
    return from_nccl(ncclAllReduce(data, data, count, ncclFloat32, ncclSum, as_comm(comm), stream_),
                     as_comm(comm));
  }

  NcclStatus all_reduce_sum(NcclCommHandle comm, int64_t* data, std::size_t count) override {
    return from_nccl(ncclAllReduce(data, data, count, ncclInt64, ncclSum, as_comm(comm), stream_),
                     as_comm(comm));
  }

  NcclStatus broadcast(NcclCommHandle comm, std::byte* data, std::size_t bytes, int root) override {
    return from_nccl(ncclBroadcast(data, data, bytes, ncclUint8, root, as_comm(comm), stream_),
                     as_comm(comm));
  }

  NcclStatus stream_status() override {
    cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) return NcclStatus::done();
    if (status == cudaErrorNotReady) return NcclStatus::pending();
    return NcclStatus::failed(concat("CUDA: ", cudaGetErrorString(status)));
  }

  NcclStatus finalize_comm(NcclCommHandle comm) override {
    return from_nccl(ncclCommFinalize(as_comm(comm)), as_comm(comm));
  }

  void destroy_comm(NcclCommHandle comm) override { ncclCommDestroy(as_comm(comm)); }
  void abort_comm(NcclCommHandle comm) override { ncclCommAbort(as_comm(comm)); }

  void* allocate_device(std::size_t bytes) override {
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, bytes);
    PRONGHORN_CHECK(status == cudaSuccess, "cudaMalloc of ", bytes,
                    " bytes for the NCCL collective failed: ", cudaGetErrorString(status));
    return ptr;
  }

  void free_device(void* ptr) override { cudaFree(ptr); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<NcclApi> make_cuda_nccl_api() { return std::make_unique<CudaNcclApi>(); }

int use_local_gpu(int local_rank) {
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices == 0) status = cudaErrorNoDevice;
  const int device = status == cudaSuccess ? local_rank % devices : 0;
  if (status == cudaSuccess) status = cudaSetDevice(device);
  if (status != cudaSuccess) {
    throw UsageError(concat("distributed.backend = \"nccl\": cannot use GPU ", device,
                            " for local rank ", local_rank, " (", cudaGetErrorString(status), ")"));
  }
  return device;
}

}  // namespace pronghorn::distributed
