// exp, log and tanh for the kernels' shared math and the model's activations,
// branch-free so a CPU loop over them vectorises (glibc's expf/logf/tanhf are
// calls the compiler cannot vectorise without -ffast-math), and identical on
// the CPU and the GPU.
// Accuracy: exp within 2 ulp, log within 3, tanh within 4e-7 relative (so
// absolute too: |tanh| never exceeds 1), of the true value over the ranges
// used (checked by core/fast_math_test.cpp against double precision). NaN in
// gives NaN out.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hd.h"

namespace pronghorn {

// min and max as plain selects: they vectorise (libm's fminf/fmaxf are calls
// on baseline x86-64). With a NaN argument they return the second one.
PRONGHORN_HD inline float min_f(float a, float b) { return a < b ? a : b; }
PRONGHORN_HD inline float max_f(float a, float b) { return a > b ? a : b; }

PRONGHORN_HD inline float bits_to_float(int32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

PRONGHORN_HD inline int32_t float_to_bits(float f) {
  int32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

// e^x. Saturates to 0 below −87.3 and to +inf above 88.7.
PRONGHORN_HD inline float fast_exp(float x) {
  const float kLog2e = 1.44269504088896341f;
  const float kLn2Hi = 0.693359375f;  // ln 2 split so n·kLn2Hi is exact
  const float kLn2Lo = -2.12194440e-4f;
  const float clamped = min_f(max_f(x, -87.3f), 88.7f);  // NaN becomes 88.7, restored below
  // floor(y) for y = clamped·log2e + 0.5 ≥ −125.5 as truncation of y + 128 > 0:
  // floorf is a library call on baseline x86-64, truncation an instruction.
  const float n = static_cast<float>(static_cast<int32_t>(clamped * kLog2e + 0.5f + 128.0f) - 128);
  const float r = clamped - n * kLn2Hi - n * kLn2Lo;  // |r| ≤ ln2/2
  // e^r by its Taylor polynomial to r⁷ (Horner): error below 2⁻²⁴ for |r| ≤ 0.347.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n split in two factors so that n = 128 (x near 88.7) does not overflow the exponent.
  const int32_t half = static_cast<int32_t>(n) / 2;
  const float scale_a = bits_to_float((half + 127) << 23);
  const float scale_b = bits_to_float((static_cast<int32_t>(n) - half + 127) << 23);
  float result = p * scale_a * scale_b;
  result = x > 88.7f ? __builtin_huge_valf() : result;
  result = x < -87.3f ? 0.0f : result;
  return x != x ? x : result;
}

// ln x for x > 0 (normal numbers), as used on sums of exponentials ≥ 1.
PRONGHORN_HD inline float fast_log(float x) {
  // x = m·2^e with m in [√½, √2): ln x = e·ln 2 + 2·atanh(s), s = (m − 1)/(m + 1).
  int32_t bits = float_to_bits(x);
  int32_t e = ((bits >> 23) & 0xff) - 127;
  float m = bits_to_float((bits & 0x007fffff) | 0x3f800000);  // in [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e = high ? e + 1 : e;
  const float s = (m - 1.0f) / (m + 1.0f);  // |s| ≤ 0.1716
  const float s2 = s * s;
  // 2·atanh(s) = 2(s + s³/3 + s⁵/5 + s⁷/7 + s⁹/9): next term below 2⁻²⁸ relative.
  float p = 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  const float ef = static_cast<float>(e);  // ln 2 split as in fast_exp: ef·hi is exact
  const float result = ef * 0.693359375f + (ef * -2.12194440e-4f + 2.0f * s * p);
  return x != x ? x : result;
}

// tanh x ≈ x·P(x²)/Q(x²) on |x| ≤ 9.1, |x| clamped there beyond (tanh 9.1 is
// 1 in float): eight FMAs and one division, no exponential. P(0) = Q(0) = 1,
// so tiny x comes back exactly and no cancellation near 0 needs a second
// formula.
// P and Q, degree 4 in x² each, minimise the largest relative error of
// x·P/Q against tanh over 3,000 Chebyshev points of x² in [0, 9.1²] (one
// linear feasibility problem per trial error, the error bisected): 2.6e-8 in
// exact arithmetic, 3.8e-8 with the coefficients rounded to float. The rest of
// the error is float rounding in the polynomials, largest for |x| in [4, 9]
// where every term counts: 3.1e-7 with FMA contraction (the AVX2 and AVX-512
// clones), 3.7e-7 without (baseline x86-64), over every float.
PRONGHORN_HD inline float fast_tanh(float x) {
  const int32_t sign = float_to_bits(x) & INT32_MIN;
  const float a = min_f(9.1f, bits_to_float(float_to_bits(x) & INT32_MAX));  // NaN stays NaN
  const float t = a * a;
  float p = 1.3121313e-8f;
  p = p * t + 2.0446050e-5f;
  p = p * t + 3.4859322e-3f;
  p = p * t + 0.13372987f;
  p = p * t + 1.0f;
  float q = 7.6826101e-7f;
  q = q * t + 3.2696626e-4f;
  q = q * t + 2.5840526e-2f;
  q = q * t + 0.46706307f;
  q = q * t + 1.0f;
  // Rounding can carry the quotient a few ulp past 1 near the clamp: |tanh| ≤ 1 holds exactly.
  const float magnitude = min_f(1.0f, a * p / q);
  return bits_to_float(float_to_bits(magnitude) | sign);
}

}  // namespace pronghorn
