// `pronghorn eval RUN --dump-forward OBS OUT`: the network's outputs for
// given observations, computed through the policy face the actors use
// (model/policy_face.h InferencePolicy), written as safetensors. What an
// export's loaders are tested against (tests/export_test.cpp): the numbers
// come from the binary, never from the loader's own math.
//
//   OBS: "obs" [T, K, obs...] of the env's dtype (T steps of K envs);
//        optional "episode_start" U8 [T, K]: zero that env's core state
//        before step t (a recurrent policy's episode boundary)
//   OUT: "logits" (discrete) or "mean" and "log_std" (continuous) [T, K, A];
//        "value" [T, K]; a recurrent core's "h_out" and "c_out" [T, K, H]
//        after each step; metadata "fused": "1" where the fused MLP ran
#pragma once

#include <string>

#include "core/config.h"
#include "tools/run_policy.h"

namespace pronghorn::cli {

void dump_forward(RunPolicy& run, const std::string& obs_path, const std::string& out_path,
                  ModelConfig::FastPath mode);

}  // namespace pronghorn::cli
