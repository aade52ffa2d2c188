// The policy face's parts both halves share (model/policy_face.h):
// observation preprocessing and the named parameter list.
#include "model/policy_face.h"

namespace pronghorn {

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
  if (obs.scalar_type() == at::kByte) return obs.to(at::kFloat).div_(255.0);  // a new tensor
  if (!model.normalizes_observations()) return obs;
  return normalize_observations(obs, model.observation_mean().to(obs.device()),
                                model.observation_var().to(obs.device()),
                                model.spec().observation_clip);
}

}  // namespace pronghorn
