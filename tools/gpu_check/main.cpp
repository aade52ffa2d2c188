// gpu_check: the CUDA kernels (against the shared math on the host, then
// timed against a device-to-device copy) and the NCCL collective, on device 0,
// with no LibTorch (docs/gpu-check.md). tools/gpu-check builds and runs it.
//
//   gpu_check [--skip-timings] [--skip-nccl] [--repeats N]
//
// Exit status: 0 every check passed; 1 a check failed (or hung, or CUDA
// failed); 2 usage; 3 no CUDA device (nothing was checked).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "tools/gpu_check/device.h"
#include "tools/gpu_check/kernel_cases.h"
#include "tools/gpu_check/kernel_timing.h"
#ifdef GPU_CHECK_WITH_NCCL
#include "tools/gpu_check/nccl_check.h"
#endif

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNoDevice = 3;

struct Args {
  bool timings = true;
  bool nccl = true;
  int repeats = 20;
};

int usage(const char* message) {
  std::fprintf(stderr,
               "gpu_check: %s\nusage: gpu_check [--skip-timings] [--skip-nccl] [--repeats N]\n",
               message);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pronghorn::gpu_check;
  Args args;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--skip-timings") == 0) {
      args.timings = false;
    } else if (std::strcmp(argv[i], "--skip-nccl") == 0) {
      args.nccl = false;
    } else if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      args.repeats = std::atoi(argv[++i]);
      if (args.repeats < 1) return usage("--repeats: expected a positive count");
    } else {
      return usage((std::string("unknown argument ") + argv[i]).c_str());
    }
  }

  std::string why;
  if (device_count(why) == 0) {
    std::printf("gpu_check: no CUDA device (%s): nothing checked\n", why.c_str());
    return kExitNoDevice;
  }
  std::string summary;
  int failed = 0;
  try {
    std::printf("gpu_check: %s\n", device_summary().c_str());
    const int kernel_failures = run_kernel_cases();
    failed += kernel_failures;
    summary = "kernels " + std::string(kernel_failures == 0 ? "PASS" : "FAIL") + " (" +
              std::to_string(kernel_failures) + " cases failed)";
    if (args.timings) run_kernel_timings(args.repeats);
    if (args.nccl) {
#ifdef GPU_CHECK_WITH_NCCL
      const int nccl_failures = run_nccl_checks();
      failed += nccl_failures;
      summary += ", nccl " + std::string(nccl_failures == 0 ? "PASS" : "FAIL") + " (" +
                 std::to_string(nccl_failures) + " steps failed)";
#else
      std::printf(
          "nccl: not built (nccl.h or libnccl was not found when gpu_check was "
          "configured)\n");
      summary += ", nccl not built";
#endif
    }
  } catch (const std::exception& e) {
    std::printf("gpu_check: FAIL: %s\n", e.what());
    return kExitFailed;
  }
  std::printf("gpu_check: %s: %s\n", failed == 0 ? "PASS" : "FAIL", summary.c_str());
  return failed == 0 ? 0 : kExitFailed;
}
