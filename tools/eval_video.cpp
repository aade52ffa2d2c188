#include "tools/eval_video.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "actor/acting.h"
#include "core/error.h"
#include "envs/env.h"
#include "envs/python_env.h"
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
  // A Python env draws its own frames when made to (Gymnasium's render_mode).
  const bool drawn = is_python_env(config);
  if (drawn) config.options.emplace("render_mode", "\"rgb_array\"");
  torch::InferenceMode inference;
  const std::unique_ptr<actor::ActingLoop> loop =
      actor::evaluation_loop(model, config, seed, fast_path);
  actor::ActingLoop& acting = *loop;
  const EnvSpec& spec = acting.spec();
  const bool pixels = spec.obs_dtype == Dtype::kUInt8 && spec.obs_shape.size() == 3;
  if (!drawn && !pixels) {
    throw UsageError(fmt::format(
        "eval --video: env {} has {}, no frames to record: --video records Gymnasium and "
        "Python envs that render (rgb_array) and envs whose observations are uint8 [C, H, W] "
        "images",
        spec.name, spec.describe()));
  }
  std::unique_ptr<VideoWriter> video;  // made at the first frame, whose size it keeps
  envs::BatchEnv::Frame frame;
  std::vector<uint8_t> obs(spec.obs_bytes());
  auto record = [&] {
    if (drawn) {
      frame = *acting.env().frame();
    } else {
      frame.height = spec.obs_shape[1];
      frame.width = spec.obs_shape[2];
      frame.rgb.resize(static_cast<size_t>(frame.height * frame.width * 3));
      frame_of(obs.data(), spec.obs_shape[0], frame.height, frame.width, frame.rgb.data());
    }
    if (!video) {
      const int scale =
          static_cast<int>(std::max<int64_t>(1, kVideoSide / std::max(frame.height, frame.width)));
      video =
          std::make_unique<VideoWriter>(path, frame.width, frame.height, scale, kFramesPerSecond);
    }
    PRONGHORN_CHECK(static_cast<int64_t>(frame.rgb.size()) == video->frame_bytes(),
                    "eval --video: ", spec.name, " drew a frame of ", frame.height, " × ",
                    frame.width, " after frames of another size");
    video->add_frame(frame.rgb.data());
  };
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
    record();
    acting.step(obs.data(), greedy, {.discrete = discrete ? &action : nullptr}, into, ended);
    ++e.env_steps;
  }
  video->finish();
  actor::summarise(e);
  return e;
}

}  // namespace pronghorn::cli
