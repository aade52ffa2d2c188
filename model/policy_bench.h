// What `pronghorn bench policy` (tools/bench_policy.cpp) measures inside the
// fused path, which only model/ may see: the backend of its matrix products
// and their time by each backend this CPU has. The rest of that bench runs
// through the policy face (model/policy_face.h) and the learner's Trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "model/policy.h"

namespace pronghorn::policy_bench {

// Which backend the fused path's products take here: "eigen-avx512",
// "eigen-avx2" or "openblas" (model/fast_gemm.h).
const char* matrix_product_backend();

// Median wall time of a callable in µs: the bench's own timer.
using MedianUs = std::function<double(const std::function<void()>&)>;

struct ProductTimes {
  double openblas_us = 0;
  std::optional<double> avx2_us;    // Eigen's; none where this CPU lacks AVX2 and FMA
  std::optional<double> avx512_us;  // Eigen's; none where this CPU lacks AVX-512
};

// The matrix products of the learner's fused forward and backward over
// `rows` (model/fast_mlp_train.cpp's, at `model`'s widths), timed by
// `median_us` for each backend.
ProductTimes time_learner_products(const ModelSpec& model, int64_t rows, const MedianUs& median_us);

}  // namespace pronghorn::policy_bench
