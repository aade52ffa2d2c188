// The fused inference path for small MLP policies (model.fast_path = "auto"):
// observations → hidden layers → policy and value heads → sampled actions in
// one pass over preallocated buffers, with no LibTorch dispatch and no
// allocation per step. LibTorch's PolicyNet stays the reference, the learner's
// model and the path for everything else (the IMPALA CNN, CUDA).
//
//   obs [N, in] ─sgemm→ bias + activation ─…→ sgemm → [N, A + 1] (logits or
//   Gaussian mean, then the value) → log-softmax / Gaussian → actions, log-probs
//   (model.separate_value: the value column from a second torso on obs)
//
// Matrix products are model/fast_gemm.h's (OpenBLAS, or Eigen on AVX-512);
// the element-wise loops are compiled for AVX-512, AVX2 and baseline x86-64
// (PRONGHORN_VECTOR_CLONES) over core/fast_math.h's exp, log and tanh, the
// same functions PolicyNet's tanh uses. Checked against PolicyNet in float64 by fast_mlp_test.cpp.
//
// Random numbers: a std::mt19937_64 of its own, seeded by the caller with the
// seed the LibTorch path gives torch::manual_seed, so a run is as
// reproducible either way and each actor keeps its own stream; the draws
// differ from LibTorch's (one uniform per categorical row, inverse CDF; two
// uniforms per pair of Gaussian draws, Box–Muller), the distributions do not.
//
// One object per thread: forward() and sample() write its buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "model/policy.h"
#include "model/sampling.h"

namespace pronghorn {

class FastMlp {
 public:
  // Whether the fused path runs this model for this env: an MLP torso on
  // float32 vector observations (not pixels), both heads on it or
  // (model.separate_value) the value head on a torso of its own.
  static bool supports(const ModelSpec& model, const EnvSpec& env);

  // The fused path for `model` when `mode` (model.fast_path) is auto and the
  // model allows it, loaded with the model's current parameters; else
  // nullptr (the caller keeps using `model`).
  static std::unique_ptr<FastMlp> make_for(PolicyNetImpl& model, const EnvSpec& env,
                                           ModelConfig::FastPath mode, uint64_t seed);

  // Parameters are zero until load().
  FastMlp(const ModelSpec& spec, uint64_t seed);

  // PolicyNetImpl::write_flat()'s layout, parameter_count() floats: what the
  // actor reads from the weight slab. Copies them.
  void load(const float* flat);
  void load(PolicyNetImpl& model);
  int64_t parameter_count() const { return static_cast<int64_t>(params_.size()); }

  void seed(uint64_t seed) { rng_.seed(seed); }

  // Runs the network on `rows` observations [rows, obs...] (float32,
  // contiguous). The outputs below stay valid until the next call.
  // with_value = false skips the value torso (model.separate_value; value()
  // is then NaN): acting needs only the policy.
  void forward(const float* obs, int64_t rows, bool with_value = true);
  float logit(int64_t row, int64_t a) const { return head_[row * head_width_ + a]; }
  float value(int64_t row) const { return head_[row * head_width_ + actions_]; }
  float log_std(int64_t d) const { return log_std_[d]; }

  // One action per row of the last forward(), written as sample_actions()
  // writes them (model/sampling.h); greedy: the most likely action (the
  // first of equals) or the Gaussian's mean.
  void sample(const EnvSpec& env, bool greedy, const ActionsOut& into);

  // forward() then sample(): the actor's step.
  void act(const float* obs, int64_t rows, const EnvSpec& env, bool greedy,
           const ActionsOut& into) {
    forward(obs, rows, /*with_value=*/false);
    sample(env, greedy, into);
  }

  // V of `rows` observations into out [rows].
  void values(const float* obs, int64_t rows, float* out);

 private:
  struct Layer {
    int64_t in = 0, out = 0;
    int64_t weight = 0, bias = 0;  // offsets in params_: [out, in] row-major, [out]
  };
  void reserve_rows(int64_t rows);
  const float* hidden_rows(const std::vector<Layer>& layers, const float* obs, int64_t rows);

  ModelSpec spec_;
  int64_t inputs_ = 0, actions_ = 0, head_width_ = 0;  // head: A logits (or means) + the value
  std::vector<Layer> torso_;                           // the hidden layers
  std::vector<Layer> value_torso_;                     // model.separate_value: the value's own
  int64_t width_ = 0;                                  // of the last hidden layer (H)
  int64_t value_width_ = 0;  // the value head's input (Hv): the value torso's last, else H
  int64_t policy_at_ = 0, value_at_ = 0;  // the heads' offsets in params_
  std::vector<float> params_;             // PolicyNet's flat layout
  std::vector<float> head_weight_;        // policy rows [A, H], then the value row [Hv]
  std::vector<float> head_bias_;          // [A + 1]
  const float* log_std_ = nullptr;        // [D] in params_ (Gaussian)
  int64_t rows_ = 0;                      // of the last forward()
  int64_t capacity_ = 0;                  // rows the buffers hold
  std::vector<float> hidden_[2];          // [rows, widest layer], ping-pong
  std::vector<float> head_;               // [rows, A + 1]
  std::vector<float> noise_;              // [rows, max(1, D)] uniforms or standard normals
  std::vector<int32_t> taken_;            // [rows] scratch for discrete actions
  std::mt19937_64 rng_;
};

}  // namespace pronghorn
