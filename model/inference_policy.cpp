// The inference half of the policy face (model/policy_face.h): the fused MLP
// (model/fast_mlp.h) or LibTorch's PolicyNet, chosen in the constructor.
#include <c10/core/InferenceMode.h>

#include <cstring>
#include <vector>

#include "model/fast_mlp.h"
#include "model/policy_face.h"

namespace pronghorn {

InferencePolicy::InferencePolicy(PolicyNet model, const EnvSpec& env, int64_t rows,
                                 ModelConfig::FastPath mode, uint64_t seed)
    : model_(std::move(model)),
      env_(env),
      rows_(rows),
      parameter_count_(model_->parameter_count()),
      published_count_(model_->published_count()),
      fast_(FastMlp::make_for(*model_, env, mode, seed)),
      core_(model_->initial_state(rows)),
      keep_(at::ones({rows, 1}, at::kFloat)) {}

InferencePolicy::~InferencePolicy() = default;

void InferencePolicy::load(const float* flat) {
  if (fast_) {
    fast_->load(flat);  // `model_` is not run: LibTorch's copies skipped
    model_->read_observation_statistics(flat + parameter_count_);
  } else {
    model_->read_published(flat);
  }
}

at::Tensor InferencePolicy::observations(const void* obs) const {
  return preprocess_observations(observation_tensor(obs, env_, rows_), *model_);
}

const float* InferencePolicy::fused_input(const void* obs) {
  const auto* rows = static_cast<const float*>(obs);
  if (!model_->normalizes_observations()) return rows;
  const int64_t d = model_->observation_size();
  scratch_.resize(static_cast<size_t>(rows_ * d));
  normalize_rows(rows, scratch_.data(), rows_, d, model_->observation_mean().data_ptr<float>(),
                 model_->observation_var().data_ptr<float>(),
                 static_cast<float>(model_->spec().observation_clip));
  return scratch_.data();
}

void InferencePolicy::act(const void* obs, bool greedy, const ActionsOut& into) {
  if (fast_) {
    fast_->act(fused_input(obs), rows_, env_, greedy, into);
    return;
  }
  c10::InferenceMode inference;
  sample_actions(model_->forward(observations(obs), core_), env_, greedy, into);
}

void InferencePolicy::forward(const void* obs, const Outputs& into) {
  const int64_t A = env_.action_size;
  const bool gaussian = env_.action_kind == ActionKind::kContinuous;
  if (fast_) {
    fast_->forward(fused_input(obs), rows_);
    for (int64_t k = 0; k < rows_; ++k) {
      for (int64_t a = 0; a < A; ++a) {
        into.logits[k * A + a] = fast_->logit(k, a);
        if (gaussian) into.log_std[k * A + a] = fast_->log_std(a);
      }
      into.values[k] = fast_->value(k);
    }
    return;
  }
  c10::InferenceMode inference;
  const PolicyOutput out = model_->forward(observations(obs), core_);
  std::memcpy(into.logits, out.logits.contiguous().data_ptr<float>(), sizeof(float) * rows_ * A);
  if (gaussian) {
    std::memcpy(into.log_std, out.log_std.contiguous().data_ptr<float>(),
                sizeof(float) * rows_ * A);
  }
  std::memcpy(into.values, out.value.contiguous().data_ptr<float>(), sizeof(float) * rows_);
}

void InferencePolicy::values(const void* obs, float* out) {
  if (fast_) {
    fast_->values(fused_input(obs), rows_, out);
    return;
  }
  c10::InferenceMode inference;
  CoreState continued = core_;  // forward() replaces it; the envs' own stays
  const at::Tensor v = model_->forward(observations(obs), continued).value.contiguous();
  std::memcpy(out, v.data_ptr<float>(), sizeof(float) * rows_);
}

void InferencePolicy::reset_ended(const uint8_t* terminated, const uint8_t* truncated) {
  if (!core_.h.defined()) return;
  float* keep = keep_.data_ptr<float>();
  bool any = false;
  for (int64_t k = 0; k < rows_; ++k) {
    const bool ended = terminated[k] != 0 || truncated[k] != 0;
    keep[k] = ended ? 0.0f : 1.0f;
    any |= ended;
  }
  if (!any) return;
  c10::InferenceMode inference;
  core_ = {core_.h * keep_, core_.c * keep_};
}

void InferencePolicy::reset() { core_ = model_->initial_state(rows_); }

void InferencePolicy::write_core_state(float* into) const {
  if (!core_.h.defined()) return;
  const int64_t n = core_.h.numel();
  std::memcpy(into, core_.h.contiguous().data_ptr<float>(), sizeof(float) * n);
  std::memcpy(into + n, core_.c.contiguous().data_ptr<float>(), sizeof(float) * n);
}

}  // namespace pronghorn
