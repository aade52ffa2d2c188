// gpu_check's few CUDA runtime helpers: whether a device is there, what it is,
// device memory that frees itself, copies in and out, and CUDA-event timing.
// Every CUDA error becomes a std::runtime_error naming the call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace pronghorn::gpu_check {

// Throws std::runtime_error("<what>: <CUDA's text>") unless `status` is cudaSuccess.
void check_cuda(cudaError_t status, const char* what);

// The device count, or 0 with `why` set (CUDA's text) where the runtime
// sees none (no driver, no device, a driver older than the runtime).
int device_count(std::string& why);

// One line about device 0, the runtime and the driver.
std::string device_summary();

// Device memory of `count` Ts, freed on destruction.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count > 0) check_cuda(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), "cudaMalloc");
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    if (count_ > 0) {
      check_cuda(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    }
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return data_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    if (count_ > 0) {
      check_cuda(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    }
    return host;
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

// A device copy of `host`, or no allocation for an empty vector (a null pointer).
template <typename T>
const T* or_null(const std::vector<T>& host, const DeviceArray<T>& device) {
  return host.empty() ? nullptr : device.get();
}

// Median seconds of `repeats` runs of `launch` on the default stream, each
// timed with CUDA events after `warmup` untimed runs.
double median_seconds(const std::function<void()>& launch, int warmup, int repeats);

}  // namespace pronghorn::gpu_check
