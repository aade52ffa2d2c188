#include "core/env_spec.h"

#include <gtest/gtest.h>

namespace pronghorn {
namespace {

TEST(EnvSpecTest, PackageDifferenceNamesWhatBothLoadedInAnotherVersion) {
  const std::map<std::string, std::string> here = {
      {"python", "3.11"}, {"gymnasium", "1.3.0"}, {"numpy", "2.2.6"}, {"torch", "2.5.0"}};
  const std::map<std::string, std::string> there = {
      {"python", "3.11"}, {"gymnasium", "1.4.0"}, {"numpy", "2.2.6"}, {"mujoco", "3.3.7"}};
  EXPECT_EQ(package_difference(here, there, "here", "there"), "gymnasium 1.3.0 here, 1.4.0 there")
      << "mujoco and torch are loaded on one side only: no difference";
  EXPECT_EQ(package_difference(here, here, "here", "there"), "");
  EXPECT_EQ(package_difference({}, {}, "here", "there"), "");
  EXPECT_EQ(package_difference({{"torch", "2.5.0+cu121"}}, {{"torch", "2.5.0+cpu"}}, "a", "b"), "")
      << "local labels are builds of one release";
  EXPECT_EQ(package_difference({{"torch", "2.5.0+cpu"}}, {{"torch", "2.5.1+cpu"}}, "a", "b"),
            "torch 2.5.0+cpu a, 2.5.1+cpu b");
}

}  // namespace
}  // namespace pronghorn
