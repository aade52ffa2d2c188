#include "kernels/fast_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pronghorn::kernels {
namespace {

// Distance in units in the last place between a float and a double.
double ulps(float got, double want) {
  float want_f = static_cast<float>(want);
  float ulp = std::nextafter(std::fabs(want_f), std::numeric_limits<float>::infinity()) -
              std::fabs(want_f);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

TEST(FastMathTest, ExpIsWithinTwoUlpOverItsRange) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.5f; x += 0.000731f) {
    worst = std::max(worst, ulps(fast_exp(x), std::exp(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 2.0);
}

TEST(FastMathTest, ExpSaturatesAndKeepsNan) {
  EXPECT_EQ(fast_exp(-1000.0f), 0.0f);
  EXPECT_EQ(fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(fast_exp(1000.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fast_exp(std::nanf(""))));
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
}

TEST(FastMathTest, LogIsWithinThreeUlpOverPositiveNormals) {
  double worst = 0;
  for (float x = 1e-30f; x < 1e30f; x *= 1.000917f) {
    double want = std::log(static_cast<double>(x));
    if (std::fabs(want) < 1e-3) continue;  // ulps of values near 0 say little; checked below
    worst = std::max(worst, ulps(fast_log(x), want));
  }
  EXPECT_LE(worst, 3.0);
  for (float x = 0.999f; x < 1.001f; x += 1e-6f) {
    ASSERT_NEAR(fast_log(x), std::log(static_cast<double>(x)), 2e-7 * std::fabs(std::log(x)) + 1e-9)
        << x;
  }
  EXPECT_TRUE(std::isnan(fast_log(std::nanf(""))));
}

}  // namespace
}  // namespace pronghorn::kernels
