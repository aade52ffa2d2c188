// The fused MLP path's element-wise loops (model/fast_mlp.h for inference,
// model/fast_mlp_train.h for the learner), each compiled for AVX-512, AVX2
// and baseline x86-64 (PRONGHORN_VECTOR_CLONES). Row-major [rows, width]
// float32 blocks; defined in fast_mlp.cpp.
#pragma once

#include <cstdint>

namespace pronghorn::fast_mlp {

// h[r, i] = activation(h[r, i] + bias[i]): tanh (core/fast_math.h's, as
// PolicyNet's) or relu.
void bias_activation(float* h, const float* bias, int64_t rows, int64_t width, bool relu);

// h[r, i] += bias[i]: an output layer's bias.
void add_bias(float* h, const float* bias, int64_t rows, int64_t width);

// g[i] *= activation'(pre-activation), from the activation's output y:
// 1 − y² for tanh, y > 0 for relu. n elements.
void activation_backward(float* g, const float* y, int64_t n, bool relu);

// out[i] += Σ_r g[r, i]: a bias's gradient.
void add_column_sums(const float* g, int64_t rows, int64_t width, float* out);

}  // namespace pronghorn::fast_mlp
