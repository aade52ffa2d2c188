#include "core/fast_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace pronghorn {
namespace {

// Distance in units in the last place between a float and a double.
double ulps(float got, double want) {
  float want_f = static_cast<float>(want);
  float ulp =
      std::nextafter(std::fabs(want_f), std::numeric_limits<float>::infinity()) - std::fabs(want_f);
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

TEST(FastMathTest, TanhIsCloseToTheTrueValueEverywhere) {
  double worst_abs = 0, worst_rel = 0, largest = 0;
  float worst_at = 0;
  for (int i = -2'000'000; i <= 2'000'000; ++i) {
    const float x = i * 1e-5f;  // [−20, 20], across the clamp at ±9.1
    const double want = std::tanh(static_cast<double>(x));
    const double got = fast_tanh(x);
    const double abs_err = std::fabs(got - want);
    const double rel_err = want == 0 ? abs_err : abs_err / std::fabs(want);
    if (rel_err > worst_rel) worst_at = x;
    worst_abs = std::max(worst_abs, abs_err);
    worst_rel = std::max(worst_rel, rel_err);
    largest = std::max(largest, std::fabs(got));
    ASSERT_EQ(fast_tanh(-x), -fast_tanh(x)) << x;  // exactly odd
  }
  // Near ±1 absolute and relative error are the same: 4e-7 is under 7 ulp of a value just below 1.
  EXPECT_LT(worst_abs, 4e-7);
  EXPECT_LT(worst_rel, 4e-7) << "worst at x = " << worst_at;
  // Rounding near the clamp must not carry |tanh| past 1.
  EXPECT_LE(largest, 1.0) << "by " << largest - 1;
  EXPECT_EQ(fast_tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(fast_tanh(-0.0f)));
  EXPECT_EQ(fast_tanh(1e-30f), 1e-30f);
  EXPECT_EQ(fast_tanh(-1e-30f), -1e-30f);
  EXPECT_EQ(fast_tanh(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(fast_tanh(-std::numeric_limits<float>::infinity()), -1.0f);
  EXPECT_EQ(fast_tanh(100.0f), 1.0f);
  EXPECT_EQ(fast_tanh(-3e38f), -1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(std::nanf(""))));
}

}  // namespace
}  // namespace pronghorn
