#include "learner/optimizer_archive.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "model/optimizer_state.h"

namespace pronghorn::learner {
namespace {

// Parameters of three shapes, each a fresh allocation with the same values.
std::vector<at::Tensor> parameters() {
  torch::manual_seed(3);
  return {torch::randn({4, 3}).requires_grad_(true), torch::randn({3}).requires_grad_(true),
          torch::randn({2, 2, 2}).requires_grad_(true)};
}

// `steps` optimizer steps with the same made-up gradients every time.
template <typename Opt>
void step(Opt& optimizer, std::vector<at::Tensor>& params, int steps) {
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].mutable_grad() =
          torch::full_like(params[i], 0.1 * static_cast<double>(s + 1)) - params[i].detach() * 0.3;
    }
    optimizer.step();
  }
}

std::unique_ptr<torch::optim::Optimizer> loaded(const std::string& bytes,
                                                std::vector<at::Tensor>& params, bool adam) {
  std::unique_ptr<torch::optim::Optimizer> o;
  if (adam) {
    o = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-3));
  } else {
    o = std::make_unique<torch::optim::RMSprop>(params, torch::optim::RMSpropOptions(1e-3));
  }
  load_optimizer(bytes, *o, at::kCPU);
  return o;
}

template <typename Opt, typename Options>
void check_same_state_same_bytes(bool adam) {
  std::vector<at::Tensor> a = parameters(), b = parameters();
  Opt first(a, Options(1e-3)), second(b, Options(1e-3));
  step(first, a, 3);
  step(second, b, 3);
  const std::string bytes = save_optimizer(first);
  EXPECT_EQ(bytes, save_optimizer(second)) << "the same state in other tensors: the same bytes";

  // It loads back: the state lands on the same parameters.
  std::vector<at::Tensor> c = parameters();
  const auto third = loaded(bytes, c, adam);
  ASSERT_EQ(third->state().size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& want = *first.state().at(optimizer_state_key(a[i]));
    const auto& got = *third->state().at(optimizer_state_key(c[i]));
    if (adam) {
      const auto& w = static_cast<const torch::optim::AdamParamState&>(want);
      const auto& g = static_cast<const torch::optim::AdamParamState&>(got);
      EXPECT_EQ(g.step(), w.step());
      EXPECT_TRUE(torch::equal(g.exp_avg(), w.exp_avg())) << i;
      EXPECT_TRUE(torch::equal(g.exp_avg_sq(), w.exp_avg_sq())) << i;
    } else {
      const auto& w = static_cast<const torch::optim::RMSpropParamState&>(want);
      const auto& g = static_cast<const torch::optim::RMSpropParamState&>(got);
      EXPECT_EQ(g.step(), w.step());
      EXPECT_TRUE(torch::equal(g.square_avg(), w.square_avg())) << i;
    }
  }
  EXPECT_EQ(save_optimizer(*third), bytes) << "loaded and saved again: the same bytes";

  // One more step moves the state, and so the bytes.
  step(second, b, 1);
  EXPECT_NE(save_optimizer(second), bytes);
}

TEST(OptimizerArchiveTest, AdamStateGivesTheSameBytesAndLoadsBackOntoTheSameParameters) {
  check_same_state_same_bytes<torch::optim::Adam, torch::optim::AdamOptions>(true);
}

TEST(OptimizerArchiveTest, RmspropStateGivesTheSameBytesAndLoadsBackOntoTheSameParameters) {
  check_same_state_same_bytes<torch::optim::RMSprop, torch::optim::RMSpropOptions>(false);
}

TEST(OptimizerArchiveTest, AnOptimizerNotYetSteppedLoadsBackWithNoState) {
  std::vector<at::Tensor> a = parameters(), c = parameters();
  torch::optim::Adam fresh(a, torch::optim::AdamOptions(1e-3));
  const auto back = loaded(save_optimizer(fresh), c, true);
  EXPECT_TRUE(back->state().empty());
}

// Checkpoints from before save_optimizer hold LibTorch's own archive, keyed
// by addresses: it loads too.
TEST(OptimizerArchiveTest, LibTorchsOwnArchiveLoadsOntoTheSameParameters) {
  std::vector<at::Tensor> a = parameters(), c = parameters();
  torch::optim::Adam first(a, torch::optim::AdamOptions(1e-3));
  step(first, a, 2);
  torch::serialize::OutputArchive archive;
  first.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  const auto back = loaded(out.str(), c, true);
  ASSERT_EQ(back->state().size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const auto& w = static_cast<const torch::optim::AdamParamState&>(
        *first.state().at(optimizer_state_key(a[i])));
    const auto& g = static_cast<const torch::optim::AdamParamState&>(
        *back->state().at(optimizer_state_key(c[i])));
    EXPECT_EQ(g.step(), 2);
    EXPECT_TRUE(torch::equal(g.exp_avg(), w.exp_avg())) << i;
    EXPECT_TRUE(torch::equal(g.exp_avg_sq(), w.exp_avg_sq())) << i;
  }
}

// As LibTorch's load: the saved options replace the optimizer's own.
TEST(OptimizerArchiveTest, TheSavedOptionsReplaceTheOptimizers) {
  std::vector<at::Tensor> a = parameters(), c = parameters();
  torch::optim::Adam saved(a, torch::optim::AdamOptions(2e-3).betas({0.8, 0.9}));
  torch::optim::Adam target(c, torch::optim::AdamOptions(5e-4));
  load_optimizer(save_optimizer(saved), target, at::kCPU);
  const auto& options =
      static_cast<const torch::optim::AdamOptions&>(target.param_groups().at(0).options());
  EXPECT_DOUBLE_EQ(options.lr(), 2e-3);
  EXPECT_DOUBLE_EQ(std::get<0>(options.betas()), 0.8);
}

TEST(OptimizerArchiveTest, AStateOfOtherParametersIsRefusedNamingTheCounts) {
  std::vector<at::Tensor> a = parameters(), c = parameters();
  c.pop_back();
  torch::optim::Adam saved(a, torch::optim::AdamOptions(1e-3));
  torch::optim::Adam target(c, torch::optim::AdamOptions(1e-3));
  try {
    load_optimizer(save_optimizer(saved), target, at::kCPU);
    FAIL() << "loaded the state of 3 parameters into an optimizer of 2";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "optimizer state: group 0 has 3 parameters, the optimizer's has 2");
  }
}

}  // namespace
}  // namespace pronghorn::learner
