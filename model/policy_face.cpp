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

at::Tensor ObservationPreprocessor::operator()(const at::Tensor& obs) const {
  // Byte observations are pixels in [0, 255]: scaled to [0, 1] for either torso.
  return obs.scalar_type() == at::kByte ? obs.to(at::kFloat).div(255.0) : obs;
}

}  // namespace pronghorn
