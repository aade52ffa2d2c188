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

inline constexpr int kPolicyFormatVersion = 1;

// Where the weights came from.
struct PolicySource {
  std::string run_name;
  std::string checkpoint;  // its file name
  uint64_t env_steps = 0;
  uint64_t learner_steps = 0;
  std::string pronghorn_version;
};

// policy.json's text (a JSON object, keys sorted).
std::string policy_description(const ModelSpec& spec, const EnvSpec& env,
                               const PolicySource& source);

}  // namespace pronghorn::exporting
