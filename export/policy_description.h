// policy.json of an export (export/policy_export.h): what the network is, in
// words a loader in any language builds it from — the observation's shape,
// dtype and preprocessing, the action space and its bounds, the torso's
// layers in order with the parameter names each uses (model/network_layout.h),
// the recurrent core, the heads, and where the numbers came from. The NumPy
// loader (export/python/pronghorn_policy.py) reads nothing else.
#pragma once

#include <cstdint>
#include <string>

#include "core/env_spec.h"
#include "model/policy.h"

namespace pronghorn::exporting {

// 2: observation.normalize (model.normalize_observations) or value_torso
// (model.separate_value) may be present, which a loader of version 1 would
// not apply; policies with neither are still written as 1, so that every
// loader reads them.
inline constexpr int kPolicyFormatVersion = 2;
inline constexpr int kPolicyFormatVersionPlain = 1;

// The statistics' tensors in model.safetensors, shaped as one observation.
inline constexpr const char* kObservationMeanTensor = "observation_mean";
inline constexpr const char* kObservationVarTensor = "observation_var";

// Where the weights came from.
struct PolicySource {
  std::string run_name;
  std::string checkpoint;  // its file name
  uint64_t env_steps = 0;
  uint64_t learner_steps = 0;
  std::string pronghorn_version;
};

// policy.json's text (a JSON object, keys sorted). `normalized`: the
// weights hold observation statistics, applied before the network.
std::string policy_description(const ModelSpec& spec, const EnvSpec& env,
                               const PolicySource& source, bool normalized);

}  // namespace pronghorn::exporting
