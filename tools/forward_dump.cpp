#include "tools/forward_dump.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "export/safetensors.h"
#include "model/policy_face.h"

namespace pronghorn::cli {

using exporting::NamedTensor;

void dump_forward(RunPolicy& run, const std::string& obs_path, const std::string& out_path,
                  ModelConfig::FastPath mode) {
  const exporting::Safetensors in = exporting::read_safetensors(obs_path);
  const EnvSpec& env = run.spec;
  const NamedTensor* obs = in.find("obs");
  if (obs == nullptr) throw UsageError(fmt::format("{}: no tensor \"obs\"", obs_path));
  std::vector<int64_t> expected = env.obs_shape;
  if (obs->dtype != env.obs_dtype || obs->shape.size() != expected.size() + 2 ||
      !std::equal(expected.begin(), expected.end(), obs->shape.begin() + 2) || obs->shape[0] < 1 ||
      obs->shape[1] < 1) {
    throw UsageError(fmt::format(
        "{}: \"obs\" is {} {}; env {} wants [T, K, {}] of {}", obs_path,
        obs->dtype == Dtype::kUInt8 ? "U8" : "F32", exporting::shape_text(obs->shape), env.name,
        fmt::join(expected, ", "), env.obs_dtype == Dtype::kUInt8 ? "U8" : "F32"));
  }
  const int64_t T = obs->shape[0], K = obs->shape[1];
  const NamedTensor* start = in.find("episode_start");
  if (start != nullptr && (start->dtype != Dtype::kUInt8 || start->shape != std::vector{T, K})) {
    throw UsageError(fmt::format("{}: \"episode_start\" must be U8 [{}, {}]", obs_path, T, K));
  }

  InferencePolicy policy(run.model, env, K, mode, /*seed=*/0);
  const int64_t A = env.action_size, H = run.model->spec().core_hidden;
  const bool gaussian = env.action_kind == ActionKind::kContinuous;
  std::vector<float> logits(T * K * A), log_std(T * K * A), values(T * K), core(2 * K * H);
  std::vector<float> h(T * K * H), c(T * K * H);
  const std::vector<uint8_t> none(K, 0);
  for (int64_t t = 0; t < T; ++t) {
    if (start != nullptr) {
      policy.reset_ended(reinterpret_cast<const uint8_t*>(start->bytes.data()) + t * K,
                         none.data());
    }
    policy.forward(obs->bytes.data() + t * K * env.obs_bytes(),
                   {logits.data() + t * K * A, log_std.data() + t * K * A, values.data() + t * K});
    if (H > 0) {
      policy.write_core_state(core.data());  // [2, K, H]: h then c
      std::memcpy(h.data() + t * K * H, core.data(), sizeof(float) * K * H);
      std::memcpy(c.data() + t * K * H, core.data() + K * H, sizeof(float) * K * H);
    }
  }
  exporting::Safetensors out;
  out.tensors.push_back(
      exporting::float_tensor(gaussian ? "mean" : "logits", {T, K, A}, logits.data()));
  if (gaussian)
    out.tensors.push_back(exporting::float_tensor("log_std", {T, K, A}, log_std.data()));
  out.tensors.push_back(exporting::float_tensor("value", {T, K}, values.data()));
  if (H > 0) {
    out.tensors.push_back(exporting::float_tensor("h_out", {T, K, H}, h.data()));
    out.tensors.push_back(exporting::float_tensor("c_out", {T, K, H}, c.data()));
  }
  out.metadata = {{"fused", policy.fused() ? "1" : "0"}, {"checkpoint", run.checkpoint}};
  exporting::write_safetensors(out_path, out);
}

}  // namespace pronghorn::cli
