// The policy face's parts both halves share (model/policy_face.h):
// observation preprocessing and the named parameter list.
#include "model/policy_face.h"

namespace pronghorn {
namespace {

// uint8 pixels [N, C, H, W] → float32 x / 255 in channels-last memory, the
// layout the CPU's convolutions take (PolicyNetImpl::flattened), in one pass.
// The same values as obs.to(kFloat).div_(255) followed by a channels-last
// copy: that was three passes over freshly allocated memory, the third a
// scalar strided copy, about a seventh of an Atari learner's step
// (BENCHMARKS.md, 2026-11-28 (late)).
at::Tensor pixels_channels_last(const at::Tensor& obs) {
  const at::Tensor in = obs.contiguous();
  const int64_t n = in.size(0), c = in.size(1), hw = in.size(2) * in.size(3);
  at::Tensor out =
      at::empty(in.sizes(), in.options().dtype(at::kFloat), at::MemoryFormat::ChannelsLast);
  const uint8_t* src = in.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  for (int64_t image = 0; image < n; ++image) {
    const uint8_t* planes = src + image * c * hw;
    float* pixels = dst + image * c * hw;
    for (int64_t i = 0; i < hw; ++i) {
      for (int64_t channel = 0; channel < c; ++channel) {
        pixels[i * c + channel] = static_cast<float>(planes[channel * hw + i]) / 255.0f;
      }
    }
  }
  return out;
}

}  // namespace

std::vector<ParameterEntry> parameter_list(PolicyNetImpl& model) {
  std::vector<ParameterEntry> list;
  int64_t offset = 0;
  // named_parameters() walks the module as parameters() does, so the order
  // is write_flat()'s.
  for (const auto& item : model.named_parameters()) {
    const at::Tensor& p = item.value();
    list.push_back({item.key(), p.sizes().vec(), offset, p.numel()});
    offset += p.numel();
  }
  return list;
}

at::Tensor preprocess_observations(const at::Tensor& obs, const PolicyNetImpl& model) {
  // Byte observations are pixels in [0, 255]: scaled to [0, 1] for either torso.
  if (obs.scalar_type() == at::kByte) {
    if (obs.is_cpu() && obs.dim() == 4 && model.spec().pixels) return pixels_channels_last(obs);
    return obs.to(at::kFloat).div_(255.0);  // a new tensor
  }
  if (!model.normalizes_observations()) return obs;
  return normalize_observations(obs, model.observation_mean().to(obs.device()),
                                model.observation_var().to(obs.device()),
                                model.spec().observation_clip);
}

}  // namespace pronghorn
