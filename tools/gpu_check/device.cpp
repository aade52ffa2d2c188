// See device.h.
#include "tools/gpu_check/device.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace pronghorn::gpu_check {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

int device_count(std::string& why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count == 0) status = cudaErrorNoDevice;
  if (status != cudaSuccess) {
    why = cudaGetErrorString(status);
    return 0;
  }
  return count;
}

std::string device_summary() {
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::ostringstream out;
  out << "device 0: " << prop.name << ", sm_" << prop.major << prop.minor << ", "
      << prop.multiProcessorCount << " SMs, " << (prop.totalGlobalMem >> 20)
      << " MiB; CUDA runtime " << runtime / 1000 << "." << runtime % 1000 / 10 << ", driver "
      << driver / 1000 << "." << driver % 1000 / 10;
  return out.str();
}

double median_seconds(const std::function<void()>& launch, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) launch();
  check_cuda(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    check_cuda(cudaEventSynchronize(stop), "timed run");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    seconds.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace pronghorn::gpu_check
