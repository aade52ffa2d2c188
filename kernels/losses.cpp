// Dispatcher of the fused losses: checks and unpacks the tensors, runs the
// CPU loop or the CUDA kernel by device, reduces the per-sample terms, and
// hands the kernel's gradients to autograd through AttachGradient.
#include "kernels/losses.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>

#include "core/error.h"
#include "kernels/losses_cpu.h"
#include "kernels/tensor_checks.h"
#ifdef PRONGHORN_WITH_CUDA
#include "kernels/losses_cuda.h"
#endif

namespace pronghorn::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// out = total, with d out / d input = `gradient` (precomputed by the kernel)
// and d out / d total = 1, so chaining one per differentiable input builds
// a total whose backward() delivers every kernel gradient.
class AttachGradient : public torch::autograd::Function<AttachGradient> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& total, const at::Tensor& input,
                            const at::Tensor& gradient) {
    ctx->save_for_backward({gradient});
    (void)input;  // only its place in the graph matters
    return total.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor& g = grad_outputs[0];
    at::Tensor gradient = ctx->get_saved_variables()[0];
    return {g, gradient * g, at::Tensor()};
  }
};

enum class Head { kCategorical, kGaussian };

struct Call {
  Head head = Head::kCategorical;
  at::Device device = at::kCPU;
  std::vector<at::Tensor> keep;  // contiguous inputs behind the raw pointers
  LossInputs raw;
};

const float* keep_float(Call& c, const at::Tensor& t, const char* name,
                        const std::vector<int64_t>& shape) {
  c.keep.push_back(checked(t.detach(), name, at::kFloat, shape, c.device));
  return c.keep.back().data_ptr<float>();
}

void prepare_sample_inputs(Call& c, const at::Tensor& values, const at::Tensor& behaviour,
                           const at::Tensor& advantages, const at::Tensor& targets,
                           const at::Tensor& old_values, const std::vector<int64_t>& tb,
                           const LossOptions& options) {
  c.raw.values = keep_float(c, values, "values", tb);
  if (options.value_clip > 0 && old_values.defined()) {
    c.raw.old_values = keep_float(c, old_values, "old_values", tb);
  }
  c.raw.advantages = keep_float(c, advantages, "advantages", tb);
  c.raw.value_targets = keep_float(c, targets, "value_targets", tb);
  PRONGHORN_CHECK(options.kind != LossKind::kPpo || behaviour.defined(),
                  "behaviour_log_probs: the PPO loss needs them, got none");
  if (behaviour.defined())
    c.raw.behaviour_log_probs = keep_float(c, behaviour, "behaviour_log_probs", tb);
}

LossParams params_for(const LossOptions& options, int64_t n) {
  PRONGHORN_CHECK(options.ppo_clip >= 0, "ppo_clip = ", options.ppo_clip, ": expected ≥ 0");
  PRONGHORN_CHECK(options.value_clip >= 0, "value_clip = ", options.value_clip, ": expected ≥ 0");
  return {options.kind,
          options.baseline_cost,
          options.entropy_cost,
          options.ppo_clip,
          options.mean_reduction ? 1.0f / static_cast<float>(std::max<int64_t>(1, n)) : 1.0f,
          options.value_clip};
}

void run(const Call& c, const LossParams& params, const LossOutputs& out) {
  check_device_supported(c.device, "loss");
  if (c.device.is_cpu()) {
    if (c.head == Head::kGaussian) return cpu::gaussian_loss(c.raw, params, out);
    PRONGHORN_CHECK(cpu::categorical_loss(c.raw, params, out),
                    "actions: expected every action in [0, ", c.raw.A, ")");
    return;
  }
#ifdef PRONGHORN_WITH_CUDA
  void* stream = cuda_stream_for(c.device);
  const char* error = c.head == Head::kCategorical
                          ? cuda::categorical_loss(c.raw, params, out, stream)
                          : cuda::gaussian_loss(c.raw, params, out, stream);
  PRONGHORN_CHECK(error == nullptr, "loss: CUDA launch failed: ", error ? error : "");
#endif
}

// total = policy + baseline_cost·value − entropy_cost·entropy, for doubles
// or 0-dim tensors alike.
template <typename T>
T total_of(const T& policy, const T& value, const T& entropy, const LossOptions& options) {
  return policy + options.baseline_cost * value - options.entropy_cost * entropy;
}

// reduce() on the CPU: the terms summed in double by one loop (at a learner
// batch's size the dozen LibTorch ops of a tensor reduction cost more than
// the arithmetic), the scalars made as one tensor.
LossResult reduce_on_host(const at::Tensor& terms, const LossOptions& options) {
  const int64_t N = terms.size(1);
  const float* t = terms.data_ptr<float>();
  std::array<double, kLossTerms> sums{};
  for (int64_t k = 0; k < kLossTerms; ++k) {
    std::array<double, 4> part{};  // four chains of additions, not one
    int64_t i = 0;
    for (; i + 4 <= N; i += 4) {
      for (int64_t j = 0; j < 4; ++j) part[j] += t[k * N + i + j];
    }
    for (; i < N; ++i) part[0] += t[k * N + i];
    sums[k] = (part[0] + part[1]) + (part[2] + part[3]);
  }
  const double n = static_cast<double>(std::max<int64_t>(1, N));
  const auto reduced = [&](int64_t term) {
    return options.mean_reduction ? sums[term] / n : sums[term];
  };
  const double policy = reduced(kPolicyTerm), value = reduced(kValueTerm),
               entropy = reduced(kEntropyTerm);
  at::Tensor scalars = at::empty({7}, at::kFloat);
  float* s = scalars.data_ptr<float>();
  s[0] = static_cast<float>(total_of(policy, value, entropy, options));
  s[1] = static_cast<float>(policy);
  s[2] = static_cast<float>(value);
  s[3] = static_cast<float>(entropy);
  s[4] = static_cast<float>(sums[kRatioTerm] / n);
  s[5] = static_cast<float>(sums[kClippedTerm] / n);
  s[6] = static_cast<float>(sums[kKlTerm] / n);
  return {scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6]};
}

// Reduces the per-sample terms [kLossTerms, N] into the result's scalars.
LossResult reduce(const at::Tensor& terms, const LossOptions& options) {
  if (terms.device().is_cpu()) return reduce_on_host(terms, options);
  const int64_t n = terms.size(1);
  // LibTorch's float sum is cascaded (accurate to a few float ulps) and is
  // 20× faster here than asking it to accumulate in double. On the device,
  // so the step queues without waiting for the GPU.
  at::Tensor sums = terms.sum(1).to(at::kDouble);
  at::Tensor per_sample = sums / static_cast<double>(std::max<int64_t>(1, n));
  at::Tensor reduced = options.mean_reduction ? per_sample : sums;
  LossResult r;
  r.policy = reduced[kPolicyTerm].to(at::kFloat);
  r.value = reduced[kValueTerm].to(at::kFloat);
  r.entropy = reduced[kEntropyTerm].to(at::kFloat);
  r.mean_ratio = per_sample[kRatioTerm].to(at::kFloat);
  r.clip_fraction = per_sample[kClippedTerm].to(at::kFloat);
  r.approx_kl = per_sample[kKlTerm].to(at::kFloat);
  r.total = total_of(reduced[kPolicyTerm], reduced[kValueTerm], reduced[kEntropyTerm], options)
                .to(at::kFloat);
  return r;
}

}  // namespace

LossResult categorical_loss(const at::Tensor& logits, const at::Tensor& values,
                            const at::Tensor& actions, const at::Tensor& behaviour_log_probs,
                            const at::Tensor& advantages, const at::Tensor& value_targets,
                            const LossOptions& options, const at::Tensor& old_values) {
  PRONGHORN_CHECK(logits.defined() && logits.dim() == 3, "logits: expected shape [T, B, A]");
  Call c;
  c.head = Head::kCategorical;
  c.device = logits.device();
  const int64_t T = logits.size(0), B = logits.size(1), A = logits.size(2);
  PRONGHORN_CHECK(A >= 1, "logits: expected at least one action, got A = 0");
  const std::vector<int64_t> tb = {T, B};
  c.raw.N = T * B;
  c.raw.A = A;
  c.raw.logits = keep_float(c, logits, "logits", {T, B, A});
  at::Tensor a = checked(actions, "actions", at::kLong, tb, c.device);
  c.keep.push_back(a);
  c.raw.actions = a.data_ptr<int64_t>();
  if (!c.device.is_cpu() && a.numel() > 0) {  // the CPU loop checks as it reads them
    PRONGHORN_CHECK(a.min().item<int64_t>() >= 0 && a.max().item<int64_t>() < A,
                    "actions: expected every action in [0, ", A, ")");
  }
  prepare_sample_inputs(c, values, behaviour_log_probs, advantages, value_targets, old_values, tb,
                        options);

  auto options_f = at::TensorOptions().dtype(at::kFloat).device(c.device);
  at::Tensor grad_logits = at::empty({T, B, A}, options_f);
  at::Tensor grad_values = at::empty({T, B}, options_f);
  at::Tensor terms = at::empty({kLossTerms, c.raw.N}, options_f);
  run(c, params_for(options, c.raw.N),
      {grad_logits.data_ptr<float>(), nullptr, grad_values.data_ptr<float>(),
       terms.data_ptr<float>()});
  LossResult r = reduce(terms, options);
  r.total = AttachGradient::apply(r.total, logits, grad_logits);
  r.total = AttachGradient::apply(r.total, values, grad_values);
  return r;
}

LossResult gaussian_loss(const at::Tensor& mean, const at::Tensor& log_std,
                         const at::Tensor& values, const at::Tensor& actions,
                         const at::Tensor& behaviour_log_probs, const at::Tensor& advantages,
                         const at::Tensor& value_targets, const LossOptions& options,
                         const at::Tensor& old_values) {
  PRONGHORN_CHECK(mean.defined() && mean.dim() == 3, "mean: expected shape [T, B, D]");
  Call c;
  c.head = Head::kGaussian;
  c.device = mean.device();
  const int64_t T = mean.size(0), B = mean.size(1), D = mean.size(2);
  PRONGHORN_CHECK(D >= 1, "mean: expected at least one action dim, got D = 0");
  const std::vector<int64_t> tb = {T, B}, tbd = {T, B, D};
  c.raw.N = T * B;
  c.raw.A = D;
  c.raw.mean = keep_float(c, mean, "mean", tbd);
  c.raw.log_std = keep_float(c, log_std, "log_std", tbd);
  c.raw.continuous_actions = keep_float(c, actions, "actions", tbd);
  prepare_sample_inputs(c, values, behaviour_log_probs, advantages, value_targets, old_values, tb,
                        options);

  auto options_f = at::TensorOptions().dtype(at::kFloat).device(c.device);
  at::Tensor grad_mean = at::empty(tbd, options_f);
  at::Tensor grad_log_std = at::empty(tbd, options_f);
  at::Tensor grad_values = at::empty(tb, options_f);
  at::Tensor terms = at::empty({kLossTerms, c.raw.N}, options_f);
  run(c, params_for(options, c.raw.N),
      {grad_mean.data_ptr<float>(), grad_log_std.data_ptr<float>(), grad_values.data_ptr<float>(),
       terms.data_ptr<float>()});
  LossResult r = reduce(terms, options);
  r.total = AttachGradient::apply(r.total, mean, grad_mean);
  r.total = AttachGradient::apply(r.total, log_std, grad_log_std);
  r.total = AttachGradient::apply(r.total, values, grad_values);
  return r;
}

}  // namespace pronghorn::kernels
