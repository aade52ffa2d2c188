#include "kernels/accelerator.h"

#include <gtest/gtest.h>

namespace pronghorn::kernels {
namespace {

TEST(AcceleratorTest, ReportsWhatThisBuildHas) {
  Accelerator a = probe_accelerator();
#ifdef PRONGHORN_WITH_CUDA
  EXPECT_TRUE(a.cuda_built);
  EXPECT_EQ(a.cuda_architectures, "80,90");
  // The runtime and NCCL answer their versions even with no GPU or driver.
  EXPECT_GE(a.cuda_runtime_version, 11000);
  EXPECT_GE(a.nccl_version, 20000);
#else
  EXPECT_FALSE(a.cuda_built);
  EXPECT_EQ(a.device_count, 0);
#endif
}

TEST(AcceleratorTest, ExplainsWhyNoDeviceIsUsable) {
  Accelerator a = probe_accelerator();
  if (a.device_count > 0) GTEST_SKIP() << "this machine has a CUDA device";
  EXPECT_FALSE(a.unavailable.empty());
  std::string line = describe(a);
  EXPECT_NE(line.find(a.unavailable), std::string::npos) << line;
}

TEST(AcceleratorTest, DescribesVersionsReadably) {
  Accelerator a;
  a.cuda_built = true;
  a.cuda_architectures = "80,90";
  a.cuda_runtime_version = 13000;
  a.nccl_version = 22805;
  a.device_count = 2;
  EXPECT_EQ(describe(a), "CUDA: built for sm 80,90 (runtime 13.0, NCCL 2.28.5); 2 device(s)");
  EXPECT_EQ(describe(Accelerator{}), "CUDA: not built");
}

}  // namespace
}  // namespace pronghorn::kernels
