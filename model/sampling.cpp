#include "model/sampling.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace pronghorn {

at::Tensor observation_tensor(const void* data, const EnvSpec& spec, int64_t rows) {
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  return at::from_blob(const_cast<void*>(data), shape,
                       spec.obs_dtype == Dtype::kFloat32 ? at::kFloat : at::kByte);
}

namespace {

void copy_out(const at::Tensor& t, void* into, size_t item_bytes) {
  const at::Tensor c = t.contiguous();
  std::memcpy(into, c.data_ptr(), item_bytes * static_cast<size_t>(c.numel()));
}

void sample_discrete(const at::Tensor& logits, bool greedy, const ActionsOut& into) {
  const at::Tensor log_p = at::log_softmax(logits, -1);
  const at::Tensor taken =
      greedy ? logits.argmax(-1) : at::multinomial(log_p.exp(), 1).squeeze(-1);  // [N]
  copy_out(taken.to(at::kInt), into.discrete, sizeof(int32_t));
  if (into.log_probs) {
    copy_out(log_p.gather(-1, taken.unsqueeze(-1)).squeeze(-1), into.log_probs, sizeof(float));
  }
}

void sample_gaussian(const PolicyOutput& out, const EnvSpec& spec, bool greedy,
                     const ActionsOut& into) {
  const at::Tensor a =
      greedy ? out.logits : out.logits + out.log_std.exp() * at::randn_like(out.logits);
  const at::Tensor sample = a.contiguous();
  const float* s = sample.data_ptr<float>();
  const int64_t n = sample.numel(), dims = spec.action_size;
  if (into.continuous) std::memcpy(into.continuous, s, sizeof(float) * n);
  for (int64_t i = 0; i < n; ++i) {
    into.clipped[i] = std::clamp(s[i], spec.action_low[i % dims], spec.action_high[i % dims]);
  }
  if (into.log_probs) {
    copy_out(gaussian_log_prob(sample, out.logits, out.log_std), into.log_probs, sizeof(float));
  }
}

}  // namespace

void sample_actions(const PolicyOutput& out, const EnvSpec& spec, bool greedy,
                    const ActionsOut& into) {
  if (spec.action_kind == ActionKind::kDiscrete) {
    sample_discrete(out.logits, greedy, into);
  } else {
    sample_gaussian(out, spec, greedy, into);
  }
}

}  // namespace pronghorn
