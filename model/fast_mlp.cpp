#include "model/fast_mlp.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/fast_math.h"
#include "core/hd.h"
#include "model/fast_gemm.h"
#include "model/fast_mlp_loops.h"

namespace pronghorn {
namespace fast_mlp {

// Vectorised along each row.
PRONGHORN_VECTOR_CLONES
void bias_activation(float* __restrict h, const float* __restrict bias, int64_t rows, int64_t width,
                     bool relu) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = h + r * width;
    // clang-tidy compares the two OpenMP directives, not their loops:
    if (relu) {  // NOLINT(bugprone-branch-clone)
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) row[i] = max_f(row[i] + bias[i], 0.0f);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < width; ++i) row[i] = fast_tanh(row[i] + bias[i]);
    }
  }
}

PRONGHORN_VECTOR_CLONES
void add_bias(float* __restrict h, const float* __restrict bias, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) h[r * width + i] += bias[i];
  }
}

PRONGHORN_VECTOR_CLONES
void activation_backward(float* __restrict g, const float* __restrict y, int64_t n, bool relu) {
  if (relu) {  // NOLINT(bugprone-branch-clone): as in bias_activation
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) g[i] = y[i] > 0.0f ? g[i] : 0.0f;
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) g[i] *= 1.0f - y[i] * y[i];
  }
}

PRONGHORN_VECTOR_CLONES
void add_column_sums(const float* __restrict g, int64_t rows, int64_t width,
                     float* __restrict out) {
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) out[i] += g[r * width + i];
  }
}

}  // namespace fast_mlp

namespace {
using fast_mlp::bias_activation;

constexpr int64_t kBlock = 256;  // rows per block of the head loops: their columns stay in L1
constexpr float kHalfLog2Pi = 0.9189385332046727f;

// The categorical head over rows of z [n, stride] (A logits each): the
// action whose cumulative probability first exceeds u[j] (inverse CDF), or
// the first most likely one when greedy, and its log-softmax. Runs action by
// action across the rows of the block so that each step vectorises.
PRONGHORN_VECTOR_CLONES
void categorical_block(const float* __restrict z, int64_t stride, int64_t n, int64_t A,
                       const float* __restrict u, bool greedy, int32_t* __restrict taken,
                       float* __restrict log_prob) {
  std::array<float, kBlock> max, sum, target, cumulative;
  std::array<int32_t, kBlock> pick;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) max[j] = z[j * stride], sum[j] = 0.0f, pick[j] = 0;
  for (int64_t a = 1; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float x = z[j * stride + a];
      pick[j] = x > max[j] ? static_cast<int32_t>(a) : pick[j];  // strict: the first of equals
      max[j] = max_f(max[j], x);
    }
  }
  for (int64_t a = 0; a < A; ++a) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) sum[j] += fast_exp(z[j * stride + a] - max[j]);
  }
  if (!greedy) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) target[j] = u[j] * sum[j], cumulative[j] = 0.0f, pick[j] = 0;
    // pick = how many prefixes of the distribution stay at or below the
    // target: the first action whose cumulative sum passes it. Capped at
    // A − 1 for the rounding of the last sum.
    for (int64_t a = 0; a + 1 < A; ++a) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        cumulative[j] += fast_exp(z[j * stride + a] - max[j]);
        pick[j] += cumulative[j] <= target[j] ? 1 : 0;
      }
    }
  }
  for (int64_t j = 0; j < n; ++j) taken[j] = pick[j];
  if (log_prob == nullptr) return;
  std::array<float, kBlock> chosen;
  for (int64_t j = 0; j < n; ++j) chosen[j] = z[j * stride + pick[j]];  // a gather: scalar
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) log_prob[j] = chosen[j] - max[j] - fast_log(sum[j]);
}

// The Gaussian head: x = mean + exp(log_std)·ε (ε = 0 when greedy), clipped
// to the env's bounds, and log N(x; mean, exp(log_std)²) summed over D.
PRONGHORN_VECTOR_CLONES
void gaussian_rows(const float* __restrict mean, int64_t stride, int64_t rows, int64_t D,
                   const float* __restrict log_std, const float* __restrict eps, bool greedy,
                   const float* __restrict low, const float* __restrict high,
                   float* __restrict sample, float* __restrict clipped,
                   float* __restrict log_prob) {
  float constant = 0.0f;  // −Σ log_std − D·½ ln 2π: the same for every row
  for (int64_t d = 0; d < D; ++d) constant -= log_std[d] + kHalfLog2Pi;
  for (int64_t r = 0; r < rows; ++r) {
    const float* m = mean + r * stride;
    const float* e = eps + r * D;
    float* x = clipped + r * D;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t d = 0; d < D; ++d) {
      const float noise = greedy ? 0.0f : e[d];
      const float s = m[d] + fast_exp(log_std[d]) * noise;
      if (sample != nullptr) sample[r * D + d] = s;
      x[d] = min_f(max_f(s, low[d]), high[d]);
      squares += noise * noise;
    }
    if (log_prob != nullptr) log_prob[r] = constant - 0.5f * squares;
  }
}

// u in [0, 1) from the top 24 bits: every value a float holds exactly.
float uniform(std::mt19937_64& rng) { return static_cast<float>(rng() >> 40) * 0x1p-24f; }

void standard_normals(std::mt19937_64& rng, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {     // Box–Muller: two normals from two uniforms
    const float u1 = 1.0f - uniform(rng);  // in (0, 1]: the log is finite
    const float u2 = uniform(rng);
    const float radius = std::sqrt(-2.0f * std::log(u1));
    const float angle = 6.2831853071795865f * u2;
    out[i] = radius * std::cos(angle);
    if (i + 1 < n) out[i + 1] = radius * std::sin(angle);
  }
}

}  // namespace

bool FastMlp::supports(const ModelSpec& model, const EnvSpec& env) {
  return !model.pixels && model.core_hidden == 0 && env.obs_dtype == Dtype::kFloat32;
}

std::unique_ptr<FastMlp> FastMlp::make_for(PolicyNetImpl& model, const EnvSpec& env,
                                           ModelConfig::FastPath mode, uint64_t seed) {
  if (mode == ModelConfig::FastPath::kOff || !supports(model.spec(), env)) {
    return nullptr;
  }
  for (const at::Tensor& p : model.parameters()) {
    if (!p.device().is_cpu()) return nullptr;  // a CUDA model stays on LibTorch
  }
  auto fast = std::make_unique<FastMlp>(model.spec(), seed);
  // A model with parameters beyond the MLP's (a recurrent core) is not ours.
  if (fast->parameter_count() != model.parameter_count()) return nullptr;
  fast->load(model);
  return fast;
}

FastMlp::FastMlp(const ModelSpec& spec, uint64_t seed) : spec_(spec), rng_(seed) {
  PRONGHORN_CHECK(!spec.pixels, "the fused MLP path runs vector observations, not pixels");
  inputs_ = 1;
  for (int64_t d : spec.obs_shape) inputs_ *= d;
  actions_ = spec.actions;
  head_width_ = actions_ + 1;
  // PolicyNetImpl::parameters()' order: the module's own parameter first
  // (log_std, Gaussian only), then its children in registration order: torso
  // Linear layers (weight, bias), the value torso's (model.separate_value),
  // the policy head, the value head.
  const int64_t log_std_at = 0;
  int64_t offset = spec.continuous ? actions_ : 0, width = inputs_;
  const auto add_layers = [&](std::vector<Layer>& into, const std::vector<int64_t>& widths) {
    width = inputs_;
    for (int64_t units : widths) {
      into.push_back({width, units, offset, offset + units * width});
      offset += units * width + units;
      width = units;
    }
  };
  add_layers(torso_, spec.hidden);
  width_ = width;
  if (spec.separate_value) add_layers(value_torso_, spec.value_widths());
  value_width_ = width;
  policy_at_ = offset;
  value_at_ = policy_at_ + actions_ * width_ + actions_;
  params_.assign(value_at_ + value_width_ + 1, 0.0f);
  log_std_ = spec.continuous ? params_.data() + log_std_at : nullptr;
  head_weight_.assign(actions_ * width_ + value_width_, 0.0f);
  head_bias_.assign(head_width_, 0.0f);
}

void FastMlp::load(const float* flat) {
  std::copy(flat, flat + params_.size(), params_.begin());
  const int64_t h = width_, hv = value_width_;
  // Policy weight [A, H] and bias [A], then value weight [1, Hv] and bias [1].
  const float* p = params_.data() + policy_at_;
  const float* v = params_.data() + value_at_;
  std::copy(p, p + actions_ * h, head_weight_.begin());
  std::copy(v, v + hv, head_weight_.begin() + actions_ * h);
  std::copy(p + actions_ * h, p + actions_ * h + actions_, head_bias_.begin());
  head_bias_[actions_] = v[hv];
}

void FastMlp::load(PolicyNetImpl& model) {
  PRONGHORN_CHECK(model.parameter_count() == parameter_count(), "fused MLP path: the model has ",
                  model.parameter_count(), " parameters, its MLP layout ", parameter_count());
  std::vector<float> flat(params_.size());
  model.write_flat(flat.data());
  load(flat.data());
}

void FastMlp::reserve_rows(int64_t rows) {
  if (rows <= capacity_) return;  // the steady state: no allocation
  int64_t widest = 1;             // a model without hidden layers uses no hidden buffer
  for (const auto* layers : {&torso_, &value_torso_}) {
    for (const Layer& layer : *layers) widest = std::max(widest, layer.out);
  }
  for (auto& buffer : hidden_) buffer.resize(rows * widest);
  head_.resize(rows * head_width_);
  noise_.resize(rows * std::max<int64_t>(1, actions_));
  taken_.resize(rows);
  capacity_ = rows;
}

void FastMlp::forward(const float* obs, int64_t rows, bool with_value) {
  PRONGHORN_CHECK(rows >= 0, "fused MLP path: ", rows, " rows");
  reserve_rows(rows);
  rows_ = rows;
  if (rows == 0) return;
  const float* x = hidden_rows(torso_, obs, rows);
  if (value_torso_.empty()) {  // both heads on the one torso: one product
    fast_mlp::gemm(false, true, rows, head_width_, width_, x, width_, head_weight_.data(), width_,
                   0.0f, head_.data(), head_width_);
  } else {  // the policy rows on the torso, the value row on the value torso
    fast_mlp::gemm(false, true, rows, actions_, width_, x, width_, head_weight_.data(), width_,
                   0.0f, head_.data(), head_width_);
    if (with_value) {
      x = hidden_rows(value_torso_, obs, rows);
      fast_mlp::gemm(false, true, rows, 1, value_width_, x, value_width_,
                     head_weight_.data() + actions_ * width_, value_width_, 0.0f,
                     head_.data() + actions_, head_width_);
    } else {  // NaN, so that a reader of value() cannot take it for one
      for (int64_t r = 0; r < rows; ++r)
        head_[r * head_width_ + actions_] = std::numeric_limits<float>::quiet_NaN();
    }
  }
  fast_mlp::add_bias(head_.data(), head_bias_.data(), rows, head_width_);
}

// The last hidden layer's activations [rows, H] of `layers` on `obs`, in
// hidden_ (the other buffer's contents are overwritten).
const float* FastMlp::hidden_rows(const std::vector<Layer>& layers, const float* obs,
                                  int64_t rows) {
  const float* x = obs;
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& layer = layers[l];
    float* h = hidden_[l % 2].data();
    // h [rows, out] = x [rows, in] · Wᵀ, W [out, in] row-major.
    fast_mlp::gemm(false, true, rows, layer.out, layer.in, x, layer.in,
                   params_.data() + layer.weight, layer.in, 0.0f, h, layer.out);
    bias_activation(h, params_.data() + layer.bias, rows, layer.out,
                    spec_.activation == ModelConfig::Activation::kRelu);
    x = h;
  }
  return x;
}

void FastMlp::sample(const EnvSpec& env, bool greedy, const ActionsOut& into) {
  PRONGHORN_CHECK(env.action_size == actions_ &&
                      (env.action_kind == ActionKind::kContinuous) == spec_.continuous,
                  "fused MLP path: env ", env.name, " does not match the model's action head");
  const int64_t rows = rows_;
  if (!spec_.continuous) {
    if (!greedy) {
      for (int64_t r = 0; r < rows; ++r) noise_[r] = uniform(rng_);
    }
    int32_t* taken = into.discrete != nullptr ? into.discrete : taken_.data();
    for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
      const int64_t n = std::min(kBlock, rows - r0);
      categorical_block(head_.data() + r0 * head_width_, head_width_, n, actions_,
                        noise_.data() + r0, greedy, taken + r0,
                        into.log_probs != nullptr ? into.log_probs + r0 : nullptr);
    }
    return;
  }
  if (!greedy) standard_normals(rng_, noise_.data(), rows * actions_);
  gaussian_rows(head_.data(), head_width_, rows, actions_, log_std_, noise_.data(), greedy,
                env.action_low.data(), env.action_high.data(), into.continuous, into.clipped,
                into.log_probs);
}

void FastMlp::values(const float* obs, int64_t rows, float* out) {
  forward(obs, rows);
  for (int64_t r = 0; r < rows; ++r) out[r] = value(r);
}

}  // namespace pronghorn
