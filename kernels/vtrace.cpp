// Dispatcher of V-trace / GAE(λ): checks and unpacks the tensors, then runs
// the CPU loop or the CUDA kernel by the tensors' device.
#include "kernels/vtrace.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "kernels/tensor_checks.h"
#include "kernels/vtrace_cpu.h"
#ifdef PRONGHORN_WITH_CUDA
#include "kernels/vtrace_cuda.h"
#endif

namespace pronghorn::kernels {
namespace {

// Keeps the contiguous inputs alive while the raw pointers in `raw` are used.
struct Prepared {
  std::vector<at::Tensor> keep;
  AdvantageInputs raw;
  at::Device device = at::kCPU;
};

const float* keep_float(Prepared& p, const at::Tensor& t, const char* name,
                        const std::vector<int64_t>& shape) {
  p.keep.push_back(checked(t, name, at::kFloat, shape, p.device));
  return p.keep.back().data_ptr<float>();
}

// Checks everything but the log-ratio inputs, whose shapes set T and B.
void prepare_common(Prepared& p, const at::Tensor& discounts, const at::Tensor& rewards,
                    const at::Tensor& values, const at::Tensor& bootstrap_values,
                    const Truncation& truncation) {
  const std::vector<int64_t> tb = {p.raw.T, p.raw.B};
  p.raw.discounts = keep_float(p, discounts, "discounts", tb);
  p.raw.rewards = keep_float(p, rewards, "rewards", tb);
  p.raw.values = keep_float(p, values, "values", tb);
  p.raw.bootstrap_values = keep_float(p, bootstrap_values, "bootstrap_values", {p.raw.B});
  PRONGHORN_CHECK(truncation.truncated.defined() == truncation.final_values.defined(),
                  "truncation: expected both truncated and final_values, or neither");
  if (truncation.truncated.defined()) {
    // As 0/1 floats: the step blends with them (vtrace_math.h).
    p.keep.push_back(checked_flags(truncation.truncated, "truncated", tb, p.device));
    p.raw.truncated = p.keep.back().data_ptr<float>();
    p.raw.final_values = keep_float(p, truncation.final_values, "final_values", tb);
  }
}

Prepared prepare_from_logits(const at::Tensor& target_logits, const at::Tensor& actions,
                             const at::Tensor& behaviour_log_probs) {
  PRONGHORN_CHECK(target_logits.defined() && target_logits.dim() == 3,
                  "target_logits: expected shape [T, B, A]",
                  target_logits.defined()
                      ? ", got " + std::to_string(target_logits.dim()) + " dimensions"
                      : std::string(", got none"));
  Prepared p;
  p.device = target_logits.device();
  p.raw.T = target_logits.size(0);
  p.raw.B = target_logits.size(1);
  p.raw.A = target_logits.size(2);
  PRONGHORN_CHECK(p.raw.A >= 1, "target_logits: expected at least one action, got A = 0");
  const std::vector<int64_t> tb = {p.raw.T, p.raw.B};
  p.raw.target_logits = keep_float(p, target_logits, "target_logits", {p.raw.T, p.raw.B, p.raw.A});
  at::Tensor a = checked(actions, "actions", at::kLong, tb, p.device);
  p.keep.push_back(a);
  p.raw.actions = a.data_ptr<int64_t>();
  p.raw.behaviour_log_probs = keep_float(p, behaviour_log_probs, "behaviour_log_probs", tb);
  if (!p.device.is_cpu() && a.numel() > 0) {  // the CPU loop checks as it reads them
    PRONGHORN_CHECK(a.min().item<int64_t>() >= 0 && a.max().item<int64_t>() < p.raw.A,
                    "actions: expected every action in [0, ", p.raw.A, ")");
  }
  return p;
}

// Runs the scan; returns (first, second, clipped_rhos) as in AdvantageOutputs.
std::array<at::Tensor, 3> run(Prepared& p, const VtraceParams& params, bool gae,
                              const char* kernel) {
  check_device_supported(p.device, kernel);
  auto options = at::TensorOptions().dtype(at::kFloat).device(p.device);
  std::array<at::Tensor, 3> result;
  for (auto& t : result) t = at::empty({p.raw.T, p.raw.B}, options);
  AdvantageOutputs out{result[0].data_ptr<float>(), result[1].data_ptr<float>(),
                       result[2].data_ptr<float>()};
  if (p.device.is_cpu()) {
    PRONGHORN_CHECK(cpu::advantages(p.raw, params, gae, out),
                    "actions: expected every action in [0, ", p.raw.A, ")");
    return result;
  }
#ifdef PRONGHORN_WITH_CUDA
  const char* error = cuda::advantages(p.raw, params, gae, out, cuda_stream_for(p.device));
  PRONGHORN_CHECK(error == nullptr, kernel, ": CUDA launch failed: ", error ? error : "");
#endif
  return result;
}

Prepared prepare_from_log_rhos(const at::Tensor& log_rhos) {
  PRONGHORN_CHECK(log_rhos.defined() && log_rhos.dim() == 2, "log_rhos: expected shape [T, B]");
  Prepared p;
  p.device = log_rhos.device();
  p.raw.T = log_rhos.size(0);
  p.raw.B = log_rhos.size(1);
  p.raw.log_rhos = keep_float(p, log_rhos, "log_rhos", {p.raw.T, p.raw.B});
  return p;
}

}  // namespace

VtraceResult vtrace_from_logits(const at::Tensor& target_logits, const at::Tensor& actions,
                                const at::Tensor& behaviour_log_probs, const at::Tensor& discounts,
                                const at::Tensor& rewards, const at::Tensor& values,
                                const at::Tensor& bootstrap_values, const VtraceParams& params,
                                const Truncation& truncation) {
  Prepared p = prepare_from_logits(target_logits, actions, behaviour_log_probs);
  prepare_common(p, discounts, rewards, values, bootstrap_values, truncation);
  auto [vs, pg, rhos] = run(p, params, /*gae=*/false, "vtrace");
  return {vs, pg, rhos};
}

VtraceResult vtrace_from_log_rhos(const at::Tensor& log_rhos, const at::Tensor& discounts,
                                  const at::Tensor& rewards, const at::Tensor& values,
                                  const at::Tensor& bootstrap_values, const VtraceParams& params,
                                  const Truncation& truncation) {
  Prepared p = prepare_from_log_rhos(log_rhos);
  prepare_common(p, discounts, rewards, values, bootstrap_values, truncation);
  auto [vs, pg, rhos] = run(p, params, /*gae=*/false, "vtrace");
  return {vs, pg, rhos};
}

GaeResult gae_from_log_rhos(const at::Tensor& log_rhos, const at::Tensor& discounts,
                            const at::Tensor& rewards, const at::Tensor& values,
                            const at::Tensor& bootstrap_values, const VtraceParams& params,
                            const Truncation& truncation) {
  Prepared p = prepare_from_log_rhos(log_rhos);
  prepare_common(p, discounts, rewards, values, bootstrap_values, truncation);
  auto [returns, advantages, rhos] = run(p, params, /*gae=*/true, "gae");
  return {advantages, returns, rhos};
}

GaeResult gae_from_logits(const at::Tensor& target_logits, const at::Tensor& actions,
                          const at::Tensor& behaviour_log_probs, const at::Tensor& discounts,
                          const at::Tensor& rewards, const at::Tensor& values,
                          const at::Tensor& bootstrap_values, const VtraceParams& params,
                          const Truncation& truncation) {
  Prepared p = prepare_from_logits(target_logits, actions, behaviour_log_probs);
  prepare_common(p, discounts, rewards, values, bootstrap_values, truncation);
  auto [returns, advantages, rhos] = run(p, params, /*gae=*/true, "gae");
  return {advantages, returns, rhos};
}

}  // namespace pronghorn::kernels
