// Random inputs for the V-trace/GAE and loss kernels, drawn the way
// kernels/vtrace_test.cpp and kernels/losses_test.cpp draw theirs, kept on the
// host and copied to the device, with views (the kernels' *Inputs structs) of
// either copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/loss_math.h"
#include "kernels/vtrace_math.h"
#include "tools/gpu_check/device.h"

namespace pronghorn::gpu_check {

// The episode-end patterns of kernels/vtrace_test.cpp.
enum class Ends { kNone, kAll, kTruncation, kExtremeRatios, kLargeLogits };
inline constexpr Ends kAllEnds[] = {Ends::kNone, Ends::kAll, Ends::kTruncation,
                                    Ends::kExtremeRatios, Ends::kLargeLogits};
std::string ends_name(Ends ends);

// [T, B] inputs of V-trace and GAE, both ways of giving log(π/μ): target
// logits [T, B, A] with actions and behaviour log-probs, or log_rhos [T, B]
// (computed in double from the same logits).
struct AdvantageHost {
  int64_t T = 0, B = 0, A = 0;
  std::vector<float> logits, behaviour, log_rhos, discounts, rewards, values, bootstrap;
  std::vector<int64_t> actions;
  std::vector<float> truncated, final_values;  // empty: no truncation
};
AdvantageHost random_advantage_inputs(int64_t T, int64_t B, int64_t A, Ends ends, uint64_t seed);

// The same on the device.
struct AdvantageDevice {
  explicit AdvantageDevice(const AdvantageHost& host);
  DeviceArray<float> logits, behaviour, log_rhos, discounts, rewards, values, bootstrap;
  DeviceArray<int64_t> actions;
  DeviceArray<float> truncated, final_values;
};

// The kernels' view of either copy; `from_logits` picks the way log(π/μ) is given.
kernels::AdvantageInputs view(const AdvantageHost& h, bool from_logits);
kernels::AdvantageInputs view(const AdvantageHost& h, const AdvantageDevice& d, bool from_logits);

// Outputs [T, B] ×3 (first, second, clipped ρ), on the host or the device.
struct AdvantageResult {
  explicit AdvantageResult(int64_t n) : first(n), second(n), rhos(n) {}
  std::vector<float> first, second, rhos;
  kernels::AdvantageOutputs view() { return {first.data(), second.data(), rhos.data()}; }
};
struct AdvantageDeviceResult {
  explicit AdvantageDeviceResult(int64_t n) : first(n), second(n), rhos(n) {}
  DeviceArray<float> first, second, rhos;
  kernels::AdvantageOutputs view() const { return {first.get(), second.get(), rhos.get()}; }
};

// N = T·B samples of a categorical (A actions) or diagonal Gaussian (A dims)
// policy; behaviour log-probs are the target's own shifted by a log-ratio
// (±20 when `extreme`, where categorical logits are also 40× larger).
struct LossHost {
  int64_t N = 0, A = 0;
  bool gaussian = false;
  std::vector<float> logits, mean, log_std, continuous_actions;
  std::vector<int64_t> actions;
  std::vector<float> behaviour, advantages, values, targets;
};
LossHost random_loss_inputs(int64_t N, int64_t A, bool gaussian, bool extreme, uint64_t seed);

struct LossDevice {
  explicit LossDevice(const LossHost& host);
  DeviceArray<float> logits, mean, log_std, continuous_actions;
  DeviceArray<int64_t> actions;
  DeviceArray<float> behaviour, advantages, values, targets;
};

kernels::LossInputs view(const LossHost& h);
kernels::LossInputs view(const LossHost& h, const LossDevice& d);

// grad_policy [N, A], grad_log_std [N, A] (Gaussian), grad_values [N],
// terms [kLossTerms, N].
struct LossResult {
  LossResult(int64_t N, int64_t A)
      : grad_policy(N * A), grad_log_std(N * A), grad_values(N), terms(kernels::kLossTerms * N) {}
  std::vector<float> grad_policy, grad_log_std, grad_values, terms;
  kernels::LossOutputs view() {
    return {grad_policy.data(), grad_log_std.data(), grad_values.data(), terms.data()};
  }
};
struct LossDeviceResult {
  LossDeviceResult(int64_t N, int64_t A)
      : grad_policy(N * A), grad_log_std(N * A), grad_values(N), terms(kernels::kLossTerms * N) {}
  DeviceArray<float> grad_policy, grad_log_std, grad_values, terms;
  kernels::LossOutputs view() const {
    return {grad_policy.get(), grad_log_std.get(), grad_values.get(), terms.get()};
  }
};

}  // namespace pronghorn::gpu_check
