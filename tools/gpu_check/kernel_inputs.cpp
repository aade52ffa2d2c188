// See kernel_inputs.h. The distributions follow kernels/vtrace_test.cpp and
// kernels/losses_test.cpp (their LibTorch draws, here with <random>).
#include "tools/gpu_check/kernel_inputs.h"

#include <cmath>
#include <random>

namespace pronghorn::gpu_check {
namespace {

class Draw {
 public:
  explicit Draw(uint64_t seed) : engine_(seed) {}
  float normal(double scale = 1.0) { return static_cast<float>(normal_(engine_) * scale); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<>(lo, hi)(engine_); }
  int64_t below(int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(engine_); }
  std::vector<float> normals(int64_t n, double scale = 1.0) {
    std::vector<float> v(n);
    for (float& x : v) x = normal(scale);
    return v;
  }

 private:
  std::mt19937_64 engine_;
  std::normal_distribution<> normal_;
};

// log-softmax of one row of logits at `action`, in double.
double log_softmax_at(const float* logits, int64_t A, int64_t action) {
  double max = logits[0];
  for (int64_t a = 1; a < A; ++a) max = std::max<double>(max, logits[a]);
  double sum = 0;
  for (int64_t a = 0; a < A; ++a) sum += std::exp(logits[a] - max);
  return logits[action] - max - std::log(sum);
}

// A log-ratio log π − μ: ±20 for the extreme cases, else normal with `spread`.
double log_ratio(Draw& draw, bool extreme, double spread) {
  return extreme ? draw.uniform(-20, 20) : draw.normal(spread);
}

}  // namespace

std::string ends_name(Ends ends) {
  switch (ends) {
    case Ends::kNone:
      return "no ends";
    case Ends::kAll:
      return "all ends";
    case Ends::kTruncation:
      return "truncation";
    case Ends::kExtremeRatios:
      return "extreme ratios";
    case Ends::kLargeLogits:
      return "large logits";
  }
  return "?";
}

AdvantageHost random_advantage_inputs(int64_t T, int64_t B, int64_t A, Ends ends, uint64_t seed) {
  Draw draw(seed);
  AdvantageHost h;
  h.T = T, h.B = B, h.A = A;
  const int64_t n = T * B;
  h.logits = draw.normals(n * A, ends == Ends::kLargeLogits ? 60.0 : 1.0);
  h.actions.resize(n);
  h.behaviour.resize(n);
  h.log_rhos.resize(n);
  h.discounts.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    h.actions[i] = draw.below(A);
    const double target = log_softmax_at(&h.logits[i * A], A, h.actions[i]);
    h.behaviour[i] =
        static_cast<float>(target - log_ratio(draw, ends == Ends::kExtremeRatios, 0.5));
    h.log_rhos[i] = static_cast<float>(target - h.behaviour[i]);
    const bool terminated = ends == Ends::kAll || (ends != Ends::kNone && draw.uniform(0, 1) < 0.1);
    h.discounts[i] = terminated ? 0.0f : 0.99f;
  }
  h.rewards = draw.normals(n);
  h.values = draw.normals(n);
  h.bootstrap = draw.normals(B);
  if (ends == Ends::kTruncation) {  // some steps both terminated and truncated
    h.truncated.resize(n);
    for (float& t : h.truncated) t = draw.uniform(0, 1) < 0.1 ? 1.0f : 0.0f;
    h.final_values = draw.normals(n);
  }
  return h;
}

AdvantageDevice::AdvantageDevice(const AdvantageHost& h)
    : logits(h.logits),
      behaviour(h.behaviour),
      log_rhos(h.log_rhos),
      discounts(h.discounts),
      rewards(h.rewards),
      values(h.values),
      bootstrap(h.bootstrap),
      actions(h.actions),
      truncated(h.truncated),
      final_values(h.final_values) {}

namespace {

// The kernels' view of `arrays`, h itself or its device copy: pointer(h's
// field, arrays' field) is that field's data, or null where h's is empty
// (no truncation, the other head's fields).
template <typename Arrays, typename Pointer>
kernels::AdvantageInputs advantage_view(const AdvantageHost& h, const Arrays& a, bool from_logits,
                                        Pointer pointer) {
  kernels::AdvantageInputs in;
  in.T = h.T, in.B = h.B, in.A = h.A;
  if (from_logits) {
    in.target_logits = pointer(h.logits, a.logits);
    in.actions = pointer(h.actions, a.actions);
    in.behaviour_log_probs = pointer(h.behaviour, a.behaviour);
  } else {
    in.log_rhos = pointer(h.log_rhos, a.log_rhos);
  }
  in.discounts = pointer(h.discounts, a.discounts);
  in.rewards = pointer(h.rewards, a.rewards);
  in.values = pointer(h.values, a.values);
  in.bootstrap_values = pointer(h.bootstrap, a.bootstrap);
  in.truncated = pointer(h.truncated, a.truncated);
  in.final_values = pointer(h.final_values, a.final_values);
  return in;
}

template <typename Arrays, typename Pointer>
kernels::LossInputs loss_view(const LossHost& h, const Arrays& a, Pointer pointer) {
  kernels::LossInputs in;
  in.N = h.N, in.A = h.A;
  in.logits = pointer(h.logits, a.logits);
  in.actions = pointer(h.actions, a.actions);
  in.mean = pointer(h.mean, a.mean);
  in.log_std = pointer(h.log_std, a.log_std);
  in.continuous_actions = pointer(h.continuous_actions, a.continuous_actions);
  in.behaviour_log_probs = pointer(h.behaviour, a.behaviour);
  in.advantages = pointer(h.advantages, a.advantages);
  in.values = pointer(h.values, a.values);
  in.value_targets = pointer(h.targets, a.targets);
  return in;
}

// pointer() for the host copy: the vector's own data.
const auto host_data = [](const auto& host, const auto& same) {
  return host.empty() ? nullptr : same.data();
};
// pointer() for the device copy (device.h's or_null).
const auto device_data = [](const auto& host, const auto& device) { return or_null(host, device); };

}  // namespace

kernels::AdvantageInputs view(const AdvantageHost& h, bool from_logits) {
  return advantage_view(h, h, from_logits, host_data);
}

kernels::AdvantageInputs view(const AdvantageHost& h, const AdvantageDevice& d, bool from_logits) {
  return advantage_view(h, d, from_logits, device_data);
}

LossHost random_loss_inputs(int64_t N, int64_t A, bool gaussian, bool extreme, uint64_t seed) {
  Draw draw(seed);
  LossHost h;
  h.N = N, h.A = A, h.gaussian = gaussian;
  h.behaviour.resize(N);
  if (gaussian) {
    h.mean = draw.normals(N * A);
    h.log_std.resize(N * A);
    h.continuous_actions.resize(N * A);
    for (int64_t i = 0; i < N * A; ++i) {
      h.log_std[i] = static_cast<float>(draw.uniform(-0.5, 0.5));
      h.continuous_actions[i] = h.mean[i] + draw.normal() * std::exp(h.log_std[i]);
    }
    const double half_log_2pi = 0.5 * std::log(2 * M_PI);
    for (int64_t i = 0; i < N; ++i) {
      double log_pi = 0;
      for (int64_t d = 0; d < A; ++d) {
        const double z = (double{h.continuous_actions[i * A + d]} - h.mean[i * A + d]) /
                         std::exp(double{h.log_std[i * A + d]});
        log_pi += -0.5 * z * z - h.log_std[i * A + d] - half_log_2pi;
      }
      h.behaviour[i] = static_cast<float>(log_pi - log_ratio(draw, extreme, 0.3));
    }
  } else {
    h.logits = draw.normals(N * A, extreme ? 40.0 : 1.0);
    h.actions.resize(N);
    for (int64_t i = 0; i < N; ++i) {
      h.actions[i] = draw.below(A);
      const double log_pi = log_softmax_at(&h.logits[i * A], A, h.actions[i]);
      h.behaviour[i] = static_cast<float>(log_pi - log_ratio(draw, extreme, 0.3));
    }
  }
  h.advantages = draw.normals(N);
  h.values = draw.normals(N);
  h.targets = draw.normals(N);
  return h;
}

LossDevice::LossDevice(const LossHost& h)
    : logits(h.logits),
      mean(h.mean),
      log_std(h.log_std),
      continuous_actions(h.continuous_actions),
      actions(h.actions),
      behaviour(h.behaviour),
      advantages(h.advantages),
      values(h.values),
      targets(h.targets) {}

kernels::LossInputs view(const LossHost& h) { return loss_view(h, h, host_data); }

kernels::LossInputs view(const LossHost& h, const LossDevice& d) {
  return loss_view(h, d, device_data);
}

}  // namespace pronghorn::gpu_check
