// The ONNX model of a policy's forward pass (proto/onnx.proto; opset 17, IR
// version 8), built from the network's layers (model/network_layout.h) and
// its weights, one initializer per parameter under its own name:
//
//   inputs:  obs [batch, obs...] (the env's dtype: float32, or uint8 pixels,
//            scaled by 1/255 inside as Pronghorn's preprocessing does);
//            a recurrent core's h_in, c_in [batch, H]
//   outputs: logits [batch, A] (discrete), or mean and log_std [batch, D]
//            (continuous; the log_std parameter is the initializer
//            "log_std_parameter", every other one keeps its name); value [batch]; h_out, c_out
//            [batch, H] (recurrent)
//
// Only standard operators (Cast, Div, Flatten, Gemm, Conv, MaxPool, Relu,
// Tanh, Add, Mul, Sigmoid, Split, Squeeze, Shape, Expand): any ONNX runtime
// runs it. The caller zeroes h_in and c_in where an episode starts.
#pragma once

#include <string>

#include "core/env_spec.h"
#include "export/safetensors.h"
#include "model/policy.h"

namespace pronghorn::exporting {

inline constexpr int kOnnxOpset = 17;
inline constexpr int kOnnxIrVersion = 8;

// The serialised ModelProto for the model `spec` makes for `env`, its
// parameters taken by name from `weights`; Error if one is missing or of
// another shape. `description` becomes the model's doc_string; the
// producer is "pronghorn" `producer_version`.
std::string onnx_policy(const ModelSpec& spec, const EnvSpec& env, const Safetensors& weights,
                        const std::string& description, const std::string& producer_version);

}  // namespace pronghorn::exporting
