#include "buffer/weight_slab.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "buffer/testing/names.h"
#include "buffer/testing/spawn.h"
#include "core/error.h"

namespace pronghorn::buffer {
namespace {

using namespace std::chrono_literals;

TEST(WeightSlabTest, ReadersGetWhatWasPublishedWithItsVersion) {
  const std::string name = testing::unique_name("slab-basic");
  auto writer = WeightSlab::create(name, 5);
  auto reader = WeightSlab::attach(name, 5);
  std::vector<float> out(5, -1);
  EXPECT_EQ(reader->read(out.data()), 0u) << "nothing published yet";
  std::vector<float> params = {1, 2, 3, 4, 5};
  EXPECT_EQ(writer->publish(params.data()), 1u);
  params[4] = 50;
  EXPECT_EQ(writer->publish(params.data()), 2u);
  EXPECT_EQ(reader->read(out.data()), 2u);
  EXPECT_EQ(out, params);
  writer->set_version(41);  // resumed from a checkpoint
  EXPECT_EQ(writer->publish(params.data()), 42u);
}

TEST(WeightSlabTest, AttachingWithAnotherSizeIsAClearError) {
  const std::string name = testing::unique_name("slab-size");
  auto writer = WeightSlab::create(name, 5);
  try {
    WeightSlab::attach(name, 6);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 5 parameters, the model has 6"), std::string::npos)
        << e.what();
  }
}

TEST(WeightSlabTest, WaitNewerWakesOnPublishAndTimesOut) {
  const std::string name = testing::unique_name("slab-wait");
  auto writer = WeightSlab::create(name, 3);
  auto reader = WeightSlab::attach(name, 3);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader->wait_newer(0, 100ms), 0u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  std::thread publisher([&] {
    std::this_thread::sleep_for(100ms);
    float p[3] = {};
    writer->publish(p);
  });
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader->wait_newer(0, 5s), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  publisher.join();
}

TEST(WeightSlabTest, ReaderProcessesNeverSeeAMixedVersionAndOneDyingHarmsNobody) {
  const std::string name = testing::unique_name("slab-mixed");
  const int64_t kCount = 1 << 20;  // 4 MiB: a copy takes long enough to be overtaken
  auto writer = WeightSlab::create(name, kCount);
  std::vector<float> params(kCount, 1.0f);  // every parameter of version v is v
  writer->publish(params.data());
  std::vector<pid_t> readers;
  for (int r = 0; r < 3; ++r) {
    readers.push_back(testing::spawn_helper({"read-slab", name, std::to_string(kCount), "1.5"}));
  }
  std::thread killer([&] {
    std::this_thread::sleep_for(500ms);
    kill(readers[2], SIGKILL);  // mid-copy, most likely
  });
  const auto end = std::chrono::steady_clock::now() + 1700ms;
  uint64_t published = 1;
  while (std::chrono::steady_clock::now() < end) {
    std::fill(params.begin(), params.end(), static_cast<float>(published + 1));
    published = writer->publish(params.data());
  }
  killer.join();
  EXPECT_EQ(testing::wait_exit(readers[0]), 0) << "reader 0 saw a mixed copy";
  EXPECT_EQ(testing::wait_exit(readers[1]), 0) << "reader 1 saw a mixed copy";
  EXPECT_EQ(testing::wait_exit(readers[2]), 128 + SIGKILL);
  EXPECT_GT(published, 20u);
  std::vector<float> out(kCount);
  auto late = WeightSlab::attach(name, kCount);
  EXPECT_EQ(late->read(out.data()), published) << "the slab works on after a reader died";
  EXPECT_EQ(out[kCount - 1], static_cast<float>(published));
}

}  // namespace
}  // namespace pronghorn::buffer
