// V-trace and GAE(λ) against a naive float64 LibTorch reference written from
// the literal formulas (the O(T²) sum), over a grid of shapes and episode-end
// patterns, plus the deterministic case of the IMPALA reference tests.
#include "kernels/vtrace.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/testing/error_of.h"
#include "kernels/testing/compare.h"

namespace pronghorn::kernels {
namespace {

using testing::all_close;

struct Batch {
  at::Tensor logits, actions, behaviour, discounts, rewards, values, bootstrap;
  at::Tensor truncated, final_values;  // undefined: no truncation
};

enum class Ends { kNone, kAll, kRandomWithTruncation, kExtremeRatios, kLargeLogits };

Batch random_batch(int64_t T, int64_t B, int64_t A, Ends ends, uint64_t seed) {
  at::manual_seed(seed);
  Batch b;
  double logit_scale = ends == Ends::kLargeLogits ? 60.0 : 1.0;
  b.logits = at::randn({T, B, A}) * logit_scale;
  b.actions = at::randint(0, A, {T, B}, at::kLong);
  at::Tensor target_log_probs =
      at::log_softmax(b.logits.to(at::kDouble), -1).gather(-1, b.actions.unsqueeze(-1)).squeeze(-1);
  at::Tensor shift =
      ends == Ends::kExtremeRatios ? (at::rand({T, B}) * 40 - 20) : at::randn({T, B}) * 0.5;
  b.behaviour = (target_log_probs - shift.to(at::kDouble)).to(at::kFloat);
  at::Tensor terminated = ends == Ends::kAll    ? at::ones({T, B})
                          : ends == Ends::kNone ? at::zeros({T, B})
                                                : (at::rand({T, B}) < 0.1).to(at::kFloat);
  b.discounts = 0.99 * (1 - terminated);
  b.rewards = at::randn({T, B});
  b.values = at::randn({T, B});
  b.bootstrap = at::randn({B});
  if (ends == Ends::kRandomWithTruncation) {
    b.truncated = at::rand({T, B}) < 0.1;  // some also terminated: both flags
    b.final_values = at::randn({T, B});
  }
  return b;
}

// The literal V-trace (gae = false) or GAE(λ) sums in float64.
struct Reference {
  at::Tensor first, second, rhos;  // vs/returns, pg/advantages, clipped ρ
};
Reference reference(const Batch& b, const at::Tensor& log_rhos_in, const VtraceParams& p,
                    bool gae) {
  auto d = [](const at::Tensor& t) { return t.to(at::kDouble); };
  const int64_t T = log_rhos_in.size(0);
  at::Tensor log_rhos = d(log_rhos_in), discounts = d(b.discounts), rewards = d(b.rewards),
             values = d(b.values), bootstrap = d(b.bootstrap);
  at::Tensor ratio = log_rhos.exp();
  at::Tensor rho = at::clamp_max(ratio, p.rho_bar), c = at::clamp_max(ratio, p.c_bar);
  at::Tensor cut = b.truncated.defined() ? d(b.truncated) : at::zeros_like(values);
  at::Tensor final_values = b.final_values.defined() ? d(b.final_values) : at::zeros_like(values);
  at::Tensor next_values = at::cat({values.slice(0, 1), bootstrap.unsqueeze(0)}, 0);
  next_values = cut * final_values + (1 - cut) * next_values;
  at::Tensor delta = rewards + discounts * next_values - values;
  at::Tensor trace = discounts * c * (1 - cut) * (gae ? p.lambda : 1.0);
  at::Tensor sum = at::zeros_like(values);
  for (int64_t s = 0; s < T; ++s) {
    at::Tensor product = at::ones_like(bootstrap);
    for (int64_t t = s; t < T; ++t) {
      sum[s] += product * rho[t] * delta[t];
      product = product * trace[t];
    }
  }
  Reference r;
  r.rhos = rho;
  if (gae) {
    r.first = values + sum;
    r.second = sum;
    return r;
  }
  r.first = values + sum;
  at::Tensor next_vs = at::cat({r.first.slice(0, 1), bootstrap.unsqueeze(0)}, 0);
  at::Tensor q = cut * final_values + (1 - cut) * next_vs;
  r.second = at::clamp_max(ratio, p.rho_pg_bar) * (rewards + discounts * q - values);
  return r;
}

at::Tensor log_rhos_of(const Batch& b) {
  return at::log_softmax(b.logits.to(at::kDouble), -1)
             .gather(-1, b.actions.unsqueeze(-1))
             .squeeze(-1) -
         b.behaviour.to(at::kDouble);
}

Truncation truncation_of(const Batch& b) { return {b.truncated, b.final_values}; }

class VtraceGridTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t>> {};

TEST_P(VtraceGridTest, MatchesTheLiteralSumsInFloat64) {
  auto [T, B, A] = GetParam();
  const VtraceParams params{/*rho_bar=*/1.0f, /*c_bar=*/0.9f, /*rho_pg_bar=*/1.5f,
                            /*lambda=*/0.95f};
  for (Ends ends : {Ends::kNone, Ends::kAll, Ends::kRandomWithTruncation, Ends::kExtremeRatios,
                    Ends::kLargeLogits}) {
    SCOPED_TRACE("T=" + std::to_string(T) + " B=" + std::to_string(B) + " A=" + std::to_string(A) +
                 " ends=" + std::to_string(static_cast<int>(ends)));
    Batch b = random_batch(T, B, A, ends, 1000 * T + 10 * B + A);
    at::Tensor log_rhos = log_rhos_of(b);
    // Float32 accumulates over up to 80 steps: compare at 1e-4 relative.
    const double rtol = 1e-4, atol = 1e-4;

    Reference want = reference(b, log_rhos, params, /*gae=*/false);
    VtraceResult got = vtrace_from_logits(b.logits, b.actions, b.behaviour, b.discounts, b.rewards,
                                          b.values, b.bootstrap, params, truncation_of(b));
    EXPECT_TRUE(all_close(got.vs, want.first, rtol, atol)) << "vs";
    EXPECT_TRUE(all_close(got.pg_advantages, want.second, rtol, atol)) << "pg_advantages";
    EXPECT_TRUE(all_close(got.clipped_rhos, want.rhos, rtol, 1e-6)) << "clipped_rhos";

    VtraceResult from_rhos = vtrace_from_log_rhos(log_rhos.to(at::kFloat), b.discounts, b.rewards,
                                                  b.values, b.bootstrap, params, truncation_of(b));
    EXPECT_TRUE(all_close(from_rhos.vs, want.first, rtol, atol)) << "vs from log_rhos";

    Reference want_gae = reference(b, log_rhos, params, /*gae=*/true);
    GaeResult gae = gae_from_logits(b.logits, b.actions, b.behaviour, b.discounts, b.rewards,
                                    b.values, b.bootstrap, params, truncation_of(b));
    EXPECT_TRUE(all_close(gae.advantages, want_gae.second, rtol, atol)) << "gae advantages";
    EXPECT_TRUE(all_close(gae.returns, want_gae.first, rtol, atol)) << "gae returns";
    GaeResult gae_from_rhos = gae_from_log_rhos(log_rhos.to(at::kFloat), b.discounts, b.rewards,
                                                b.values, b.bootstrap, params, truncation_of(b));
    EXPECT_TRUE(all_close(gae_from_rhos.advantages, want_gae.second, rtol, atol))
        << "gae advantages from log_rhos";
    EXPECT_TRUE(all_close(gae_from_rhos.returns, want_gae.first, rtol, atol))
        << "gae returns from log_rhos";
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, VtraceGridTest,
                         ::testing::Combine(::testing::Values(1, 5, 80),
                                            ::testing::Values(1, 7, 256),
                                            ::testing::Values(1, 2, 18)));

TEST(VtraceTest, ReproducesTheImpalaReferenceCase) {
  at::Tensor log_rhos = at::tensor({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f}).reshape({5, 1});
  at::Tensor discounts = at::full({5, 1}, 0.9f);
  at::Tensor rewards = at::tensor({0.f, 1.f, 2.f, 3.f, 4.f}).reshape({5, 1});
  at::Tensor values = at::tensor({0.f, 1.f, 2.f, 3.f, 4.f}).reshape({5, 1});
  at::Tensor bootstrap = at::tensor({1.0f});
  VtraceResult r = vtrace_from_log_rhos(log_rhos, discounts, rewards, values, bootstrap,
                                        {/*rho_bar=*/3.7f, /*c_bar=*/1.0f, /*rho_pg_bar=*/2.2f});
  at::Tensor vs = at::tensor({0.200182, 2.709682, 8.513628, 11.932397, 7.33}).reshape({5, 1});
  at::Tensor pg = at::tensor({0.200182, 1.709682, 6.513628, 10.876614, 1.98}).reshape({5, 1});
  EXPECT_TRUE(all_close(r.vs, vs, 0, 1e-5));
  EXPECT_TRUE(all_close(r.pg_advantages, pg, 0, 1e-5));
}

TEST(VtraceTest, TruncationBootstrapsFromTheFinalValue) {
  // One column, 3 steps, on-policy; step 1 is cut by a time limit. The
  // return of steps 0–1 must stop at step 1 and bootstrap from its final
  // value (5), and step 2 (a new episode) from the bootstrap value (10).
  at::Tensor zeros = at::zeros({3, 1});
  at::Tensor rewards = at::ones({3, 1});
  at::Tensor truncated = at::tensor({0, 1, 0}, at::kByte).reshape({3, 1});
  at::Tensor final_values = at::tensor({0.f, 5.f, 0.f}).reshape({3, 1});
  VtraceResult r = vtrace_from_log_rhos(zeros, at::full({3, 1}, 0.5f), rewards, zeros,
                                        at::tensor({10.f}), {}, {truncated, final_values});
  at::Tensor vs = at::tensor({1 + 0.5 * (1 + 0.5 * 5), 1 + 0.5 * 5, 1 + 0.5 * 10}).reshape({3, 1});
  EXPECT_TRUE(all_close(r.vs, vs, 0, 1e-6));
  EXPECT_TRUE(all_close(r.pg_advantages, vs, 0, 1e-6)) << "on-policy, V = 0: pg = vs";
}

TEST(VtraceTest, AcceptsNonContiguousInputs) {
  Batch b = random_batch(6, 5, 3, Ends::kRandomWithTruncation, 3);
  at::Tensor rewards_t = b.rewards.t().contiguous().t();  // same values, transposed strides
  ASSERT_FALSE(rewards_t.is_contiguous());
  VtraceResult a = vtrace_from_logits(b.logits, b.actions, b.behaviour, b.discounts, b.rewards,
                                      b.values, b.bootstrap, {}, truncation_of(b));
  VtraceResult c = vtrace_from_logits(b.logits, b.actions, b.behaviour, b.discounts, rewards_t,
                                      b.values, b.bootstrap, {}, truncation_of(b));
  EXPECT_TRUE(at::equal(a.vs, c.vs));
}

TEST(VtraceTest, BadArgumentsNameTheArgument) {
  Batch b = random_batch(4, 3, 2, Ends::kNone, 1);
  auto call = [&](const at::Tensor& logits, const at::Tensor& actions, const at::Tensor& rewards,
                  const at::Tensor& bootstrap) {
    return pronghorn::testing::error_of([&] {
      vtrace_from_logits(logits, actions, b.behaviour, b.discounts, rewards, b.values, bootstrap,
                         {});
    });
  };
  EXPECT_EQ(call(b.logits, b.actions, b.rewards.slice(0, 1), b.bootstrap),
            "rewards: expected shape [4, 3], got [3, 3]");
  EXPECT_EQ(call(b.logits, b.actions, b.rewards.to(at::kDouble), b.bootstrap),
            "rewards: expected dtype Float, got Double");
  EXPECT_EQ(call(b.logits, b.actions.to(at::kInt), b.rewards, b.bootstrap),
            "actions: expected dtype Long, got Int");
  EXPECT_EQ(call(b.logits, b.actions, b.rewards, at::zeros({4})),
            "bootstrap_values: expected shape [3], got [4]");
  EXPECT_EQ(call(b.logits.reshape({12, 2}), b.actions, b.rewards, b.bootstrap),
            "target_logits: expected shape [T, B, A], got 2 dimensions");
  EXPECT_EQ(call(b.logits, b.actions + 2, b.rewards, b.bootstrap),
            "actions: expected every action in [0, 2)");
  EXPECT_EQ(pronghorn::testing::error_of([&] {
              vtrace_from_log_rhos(b.rewards, b.discounts, b.rewards, b.values, b.bootstrap, {},
                                   {b.rewards > 0, at::Tensor()});
            }),
            "truncation: expected both truncated and final_values, or neither");
}

}  // namespace
}  // namespace pronghorn::kernels
