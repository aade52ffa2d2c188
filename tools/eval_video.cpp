#include "tools/eval_video.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "actor/acting.h"
#include "core/error.h"
#include "envs/env.h"
#include "tools/video_writer.h"

namespace pronghorn::cli {
namespace {

constexpr int kFramesPerSecond = 30;
constexpr int64_t kVideoSide = 256;  // frames are scaled up to about this many pixels

// obs uint8 [C, H, W] → rgb [H, W, 3].
void frame_of(const uint8_t* obs, int64_t c, int64_t h, int64_t w, uint8_t* rgb) {
  const int64_t plane = h * w;
  for (int64_t i = 0; i < plane; ++i) {
    for (int64_t k = 0; k < 3; ++k) {
      const int64_t channel = c == 3 ? k : c - 1;  // grey, or the newest of a stack
      rgb[3 * i + k] = obs[channel * plane + i];
    }
  }
}

}  // namespace

actor::Evaluation record_episodes(PolicyNet& model, const EnvConfig& env_config, int64_t episodes,
                                  bool greedy, uint64_t seed, ModelConfig::FastPath fast_path,
                                  const std::string& path) {
  EnvConfig config = env_config;
  config.num_envs = 1;
  torch::InferenceMode inference;
  const auto sampler_seed = static_cast<uint64_t>(
      at::randint(std::numeric_limits<int64_t>::max(), {1}, at::kLong).item<int64_t>());
  actor::ActingLoop acting(envs::make_env(config, seed), model, fast_path, sampler_seed);
  const EnvSpec& spec = acting.spec();
  if (spec.obs_dtype != Dtype::kUInt8 || spec.obs_shape.size() != 3) {
    throw UsageError(
        fmt::format("eval --video: env {} has {}, no frames to record: --video records envs whose "
                    "observations are uint8 [C, H, W] images (rendering Gymnasium envs is planned)",
                    spec.name, spec.describe()));
  }
  const int64_t c = spec.obs_shape[0], h = spec.obs_shape[1], w = spec.obs_shape[2];
  const int scale = static_cast<int>(std::max<int64_t>(1, kVideoSide / std::max(h, w)));
  VideoWriter video(path, w, h, scale, kFramesPerSecond);
  std::vector<uint8_t> obs(spec.obs_bytes()), rgb(h * w * 3);
  float reward = 0;
  uint8_t terminated = 0, truncated = 0;
  int32_t action = 0;
  actor::Evaluation e;
  const actor::ActingLoop::EpisodeEnd ended = [&](int64_t, double episode_return, int32_t length) {
    e.returns.push_back(episode_return);
    e.lengths.push_back(length);
  };
  const actor::ActingLoop::StepInto into{
      .env = {obs.data(), &reward, &terminated, &truncated, nullptr}};
  const bool discrete = spec.action_kind == ActionKind::kDiscrete;
  acting.reset(obs.data());
  while (static_cast<int64_t>(e.returns.size()) < episodes) {
    frame_of(obs.data(), c, h, w, rgb.data());
    video.add_frame(rgb.data());
    acting.step(obs.data(), greedy, {.discrete = discrete ? &action : nullptr}, into, ended);
    ++e.env_steps;
  }
  video.finish();
  actor::summarise(e);
  return e;
}

}  // namespace pronghorn::cli
