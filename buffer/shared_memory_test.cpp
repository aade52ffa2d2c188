#include "buffer/shared_memory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "buffer/testing/names.h"
#include "core/error.h"
#include "core/testing/error_of.h"

namespace pronghorn::buffer {
namespace {

TEST(SharedMemoryTest, ReservesItsPagesAtCreation) {
  const std::string name = testing::unique_name("shm-reserve");
  const size_t bytes = size_t{16} << 20;
  SharedMemory memory = SharedMemory::create("test " + name, name, bytes);
  struct stat st {};
  ASSERT_EQ(stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_GE(static_cast<size_t>(st.st_blocks) * 512, bytes)
      << "allocated now, not at first touch (where a full /dev/shm is a SIGBUS)";
}

TEST(SharedMemoryTest, MoreThanDevShmHoldsIsOneLineNamingNeedAndFreeSpace) {
  struct statvfs fs {};
  ASSERT_EQ(statvfs("/dev/shm", &fs), 0);
  if (fs.f_blocks == 0) GTEST_SKIP() << "/dev/shm has no size limit";
  // More than the whole of /dev/shm: the kernel refuses at once, nothing is
  // allocated meanwhile.
  const size_t bytes = static_cast<size_t>(fs.f_blocks) * fs.f_frsize + (size_t{1} << 20);
  const std::string name = testing::unique_name("shm-too-big");
  const std::string message =
      pronghorn::testing::error_of([&] { SharedMemory::create("ring " + name, name, bytes); });
  EXPECT_EQ(message.rfind("ring " + name + ": needs " + format_bytes(bytes) + " in /dev/shm, ", 0),
            0u)
      << message;
  EXPECT_TRUE(message.ends_with(" free")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  struct stat st {};
  EXPECT_NE(stat(("/dev/shm" + name).c_str(), &st), 0) << "removed on failure";
}

TEST(SharedMemoryTest, SizesReadForPeople) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3355443), "3.2 MiB");
  EXPECT_EQ(format_bytes(uint64_t{3} << 30), "3.0 GiB");
}

}  // namespace
}  // namespace pronghorn::buffer
