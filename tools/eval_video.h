// `pronghorn eval RUN --video FILE`: the policy's episodes on one env, each
// step's frame sent to a video (tools/video_writer.h), scaled up with nearest
// neighbour to about 256 pixels when smaller. The frames of a Gymnasium or
// Python env are the env's own pictures (made with render_mode =
// "rgb_array" unless env.options names another); those of a built-in or
// plugin pixel env its observations (uint8 [C, H, W]: one channel as grey,
// three as RGB, a stack of frames by its last). Other envs are refused in
// words.
#pragma once

#include <cstdint>
#include <string>

#include "actor/evaluation.h"
#include "core/config.h"
#include "model/policy.h"

namespace pronghorn::cli {

// `episodes` episodes, one after another on one env seeded `seed`, into the
// video at `path`; their returns and lengths, in order.
actor::Evaluation record_episodes(PolicyNet& model, const EnvConfig& env_config, int64_t episodes,
                                  bool greedy, uint64_t seed, ModelConfig::FastPath fast_path,
                                  const std::string& path);

}  // namespace pronghorn::cli
