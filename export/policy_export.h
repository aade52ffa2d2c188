// `pronghorn export`'s output: a trained policy in files any program reads,
// without Pronghorn (docs/export.md).
//
//   model.safetensors   the parameters, named as the policy face names them
//                       (model/policy_face.h parameter_list: "torso.0.weight")
//   policy.json         what the network is (export/policy_description.h)
//   policy.onnx         its forward pass (export/onnx_policy.h)
//   pronghorn_policy.py a NumPy-only loader of the three: load(DIR).predict(obs)
#pragma once

#include <string>
#include <vector>

#include "export/policy_description.h"
#include "export/safetensors.h"
#include "model/policy.h"

namespace pronghorn::exporting {

// The model's parameters as named tensors, in the flat vector's order.
Safetensors policy_weights(PolicyNetImpl& model, const PolicySource& source);

// Writes the four files into `out_dir` (created if missing; each file
// replaced atomically); returns their paths.
std::vector<std::string> export_policy(PolicyNetImpl& model, const EnvSpec& env,
                                       const PolicySource& source, const std::string& out_dir);

}  // namespace pronghorn::exporting
