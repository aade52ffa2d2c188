// Several learners as threads of one process, each with its own Trainer and
// GlooCollective over a TCPStore on 127.0.0.1: the weighted all-reduce gives
// every rank the gradient one learner computes on the concatenated batch, the
// replicas stay bit-identical, a diverged replica is repaired, the votes
// and a non-finite loss reach every rank, and the observation statistics
// take in every rank's batch.
//
// The model, the kernels and the all-reduce buffer are float32 (the kernels
// take float32 only); float64 is used where the test computes: the weighted
// combination of the ranks' own gradients it checks the reduce against, and
// every error measure (expect_concatenated_gradient says which bound is which).
#include "learner/data_parallel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "learner/testing/data_parallel_ranks.h"
#include "learner/trainer.h"
#include "model/observation_norm.h"

namespace pronghorn::learner {
namespace {

using namespace pronghorn::learner::testing;

struct Case {
  int world;
  const char* reduction;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.world << " ranks, loss.reduction " << c.reduction;
}

class DataParallelGradientTest : public ::testing::TestWithParam<Case> {};

// The reduce on every rank of `job`, rank r having run backward on
// batches[r] (its 0-sample stand-in too, when empty[r]), checked against
// (a) the float64 weighted combination of the ranks' own float32 gradients:
//     what the all-reduce computes, so only its float32 rounding remains;
// (b) the one-process gradient of the concatenated batch (the ranks with
//     samples), in relative L2 norm: the one-process float32 backward itself
//     differs from (a) by up to 1e-6 of a parameter's largest element (it
//     accumulates the samples in another order), so an element-wise bound
//     would measure the reference's rounding, not the reduce.
void expect_concatenated_gradient(Job& job, const std::vector<Batch>& batches,
                                  const std::vector<bool>& empty) {
  const int world = job.world();
  const bool mean = job.config.loss.reduction == LossConfig::Reduction::kMean;
  std::vector<Batch> with_samples;
  std::vector<uint64_t> samples(world, 0);
  uint64_t total = 0;
  for (int r = 0; r < world; ++r) {
    job.trainers[r]->backward(batches[r]);
    if (empty[r]) continue;
    with_samples.push_back(batches[r]);
    total += samples[r] = samples_of(batches[r]);
  }
  torch::manual_seed(7);
  Trainer one(job.config, cartpole());
  ASSERT_EQ(weights(one), weights(*job.trainers[0]));
  one.backward(concatenated(with_samples));
  const std::vector<at::Tensor> concatenated_gradient = gradients(one);

  std::vector<at::Tensor> combination;
  for (const at::Tensor& g : concatenated_gradient)
    combination.push_back(torch::zeros_like(g, at::kDouble));
  for (int r = 0; r < world; ++r) {
    if (empty[r]) continue;
    const std::vector<at::Tensor> local = gradients(*job.trainers[r]);
    const double weight = mean ? static_cast<double>(samples[r]) / total : 1.0;
    for (size_t i = 0; i < local.size(); ++i) combination[i] += local[i].to(at::kDouble) * weight;
  }

  const std::vector<ClusterStep> steps = job.reduce(samples);
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(steps[r].samples, total) << "rank " << r;
    const std::vector<at::Tensor> reduced = gradients(*job.trainers[r]);
    EXPECT_LT(worst_relative_error(reduced, combination), 1e-6) << "rank " << r;
    EXPECT_LT(norm_relative_error(reduced, concatenated_gradient), 1e-6) << "rank " << r;
  }
}

// Rank r gets N = 3 + 4·r envs, so a plain mean of the ranks' gradients
// (unweighted) is not the concatenated batch's.
TEST_P(DataParallelGradientTest, EveryRankHasTheGradientOfTheConcatenatedBatch) {
  const auto [world, reduction] = GetParam();
  Job job(world, reduction);
  std::vector<Batch> batches;
  for (int r = 0; r < world; ++r) batches.push_back(random_batch(3 + 4 * r, 100 + r));
  expect_concatenated_gradient(job, batches, std::vector<bool>(world, false));
}

// The last rank enters with 0 samples while its .grad still holds another
// batch's gradients: they count for nothing.
TEST_P(DataParallelGradientTest, ARankWithNoSamplesAddsNothing) {
  const auto [world, reduction] = GetParam();
  Job job(world, reduction);
  std::vector<Batch> batches;
  for (int r = 0; r < world; ++r) batches.push_back(random_batch(3 + 4 * r, 200 + r));
  std::vector<bool> empty(world, false);
  empty[world - 1] = true;
  expect_concatenated_gradient(job, batches, empty);
}

// A rank that has never had a batch (no .grad yet) still takes the step:
// it receives the others' gradient.
TEST_P(DataParallelGradientTest, ARankThatNeverHadABatchReceivesTheGradient) {
  const auto [world, reduction] = GetParam();
  Job job(world, reduction);
  std::vector<uint64_t> samples(world, 0);
  for (int r = 1; r < world; ++r) {
    const Batch b = random_batch(2 + r, 500 + r);
    job.trainers[r]->backward(b);
    samples[r] = samples_of(b);
  }
  ASSERT_FALSE(job.trainers[0]->model()->parameters()[0].grad().defined());
  job.reduce(samples);
  const std::vector<at::Tensor> want = gradients(*job.trainers[1]);
  const std::vector<at::Tensor> got = gradients(*job.trainers[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << "parameter " << i;
    EXPECT_TRUE(torch::equal(got[i], want[i])) << "parameter " << i;
  }
}

TEST_P(DataParallelGradientTest, NoSamplesAnywhereIsNoStepAndLeavesTheGradients) {
  const auto [world, reduction] = GetParam();
  Job job(world, reduction);
  std::vector<std::vector<at::Tensor>> before;
  for (int r = 0; r < world; ++r) {
    job.trainers[r]->backward(random_batch(4, 300 + r));
    before.push_back(gradients(*job.trainers[r]));
  }
  const std::vector<ClusterStep> steps = job.reduce(std::vector<uint64_t>(world, 0));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(steps[r].samples, 0u) << "rank " << r;
    const std::vector<at::Tensor> after = gradients(*job.trainers[r]);
    for (size_t i = 0; i < after.size(); ++i) {
      EXPECT_TRUE(torch::equal(after[i], before[r][i])) << "rank " << r << ", parameter " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RanksAndReductions, DataParallelGradientTest,
                         ::testing::Values(Case{2, "mean"}, Case{2, "sum"}, Case{3, "mean"},
                                           Case{3, "sum"}),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           return std::to_string(param_info.param.world) + "ranks_" +
                                  param_info.param.reduction;
                         });

TEST(DataParallelTest, AfterAStepTheReplicasAreBitIdenticalAndADivergedOneIsRepaired) {
  Job job(3, "mean");
  for (uint64_t step = 0; step < 3; ++step) step_together(job, 10 * step);
  const std::vector<float> rank0 = weights(*job.trainers[0]);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(weights(*job.trainers[r]), rank0) << "rank " << r;
    EXPECT_EQ(adam_state(*job.trainers[r]), adam_state(*job.trainers[0])) << "rank " << r;
  }
  std::vector<int> repaired(3, -1);
  job.on_every_rank([&](int r) { repaired[r] = job.parallel[r]->check_replicas(3); });
  EXPECT_EQ(repaired, (std::vector<int>{0, 0, 0})) << "identical replicas need no repair";

  // Rank 2 diverges: one more step of its own moves its weights and its
  // optimizer state (Adam's moments and step count).
  StepStats s = job.trainers[2]->backward(random_batch(5, 77));
  job.trainers[2]->apply(s, 0.0);
  ASSERT_NE(weights(*job.trainers[2]), rank0);
  ASSERT_NE(adam_state(*job.trainers[2]), adam_state(*job.trainers[0]));
  job.on_every_rank([&](int r) { repaired[r] = job.parallel[r]->check_replicas(4); });
  EXPECT_EQ(repaired, (std::vector<int>{1, 1, 1})) << "every rank takes part in the repair";
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(weights(*job.trainers[r]), rank0) << "rank " << r;
    EXPECT_EQ(adam_state(*job.trainers[r]), adam_state(*job.trainers[0])) << "rank " << r;
  }
  // The optimizer state came back whole: the next step keeps them identical.
  step_together(job, 50);
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(weights(*job.trainers[r]), weights(*job.trainers[0])) << "rank " << r;
  }
}

TEST(DataParallelTest, ShareInitialStateGivesEveryRankRank0sWeightsOptimizerAndCounters) {
  Job job(2, "mean", [](int r) { return uint64_t{1} + 1000 * r; });
  ASSERT_NE(weights(*job.trainers[1]), weights(*job.trainers[0]));
  StepStats s = job.trainers[0]->backward(random_batch(4, 5));  // rank 0 has stepped (resumed)
  job.trainers[0]->apply(s, 0.0);
  std::vector<RunCounters> counters(2);
  counters[0] = {.env_steps = 1234, .learner_steps = 56, .episodes = 78, .policy_version = 57};
  counters[1] = {.env_steps = 1, .learner_steps = 2, .episodes = 3, .policy_version = 4};
  job.on_every_rank([&](int r) { job.parallel[r]->share_initial_state(counters[r]); });
  EXPECT_EQ(weights(*job.trainers[1]), weights(*job.trainers[0]));
  ASSERT_FALSE(adam_state(*job.trainers[0]).empty());
  EXPECT_EQ(adam_state(*job.trainers[1]), adam_state(*job.trainers[0]));
  for (const RunCounters& c : counters) {
    EXPECT_EQ(c.env_steps, 1234u);
    EXPECT_EQ(c.learner_steps, 56u);
    EXPECT_EQ(c.episodes, 78u);
    EXPECT_EQ(c.policy_version, 57u);
  }
  step_together(job, 60);
  EXPECT_EQ(weights(*job.trainers[1]), weights(*job.trainers[0]));
}

TEST(DataParallelTest, OneRanksStopAndTargetVotesReachEveryRank) {
  Job job(3, "mean");
  std::vector<ClusterStep> steps(3);
  // Rank 1 is asked to stop; ranks 0 and 2 reached the target with mean
  // returns 100 and 250, rank 1 did not (its return is not counted).
  job.on_every_rank([&](int r) {
    LocalStep mine;
    mine.stop = mine.stop_now = r == 1;
    mine.target = r != 1;
    mine.target_return = r == 0 ? 100.0 : 250.0;
    steps[r] = job.parallel[r]->reduce(mine);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(steps[r].samples, 0u) << "rank " << r;
    EXPECT_TRUE(steps[r].stop) << "rank " << r;
    EXPECT_TRUE(steps[r].stop_now) << "rank " << r;
    EXPECT_TRUE(steps[r].target) << "rank " << r;
    EXPECT_DOUBLE_EQ(steps[r].target_return, 175.0) << "rank " << r;
  }
  // Nobody votes: no stop, no target.
  job.on_every_rank([&](int r) {
    LocalStep mine;
    mine.target_return = 99;  // without a target vote, not counted
    steps[r] = job.parallel[r]->reduce(mine);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(steps[r].stop) << "rank " << r;
    EXPECT_FALSE(steps[r].stop_now) << "rank " << r;
    EXPECT_FALSE(steps[r].target) << "rank " << r;
  }
}

TEST(DataParallelTest, ANonFiniteLossOnOneRankStopsEveryRanksStepAndLeavesTheWeights) {
  Job job(3, "mean");
  const std::vector<float> before = weights(*job.trainers[0]);
  std::vector<std::string> errors(3);
  std::vector<Batch> batches;
  for (int r = 0; r < 3; ++r) batches.push_back(random_batch(4, 400 + r));
  job.on_every_rank([&](int r) {
    const Batch& b = batches[r];
    StepStats s = job.trainers[r]->backward(b);
    LocalStep mine = with_samples(samples_of(b));
    mine.loss_finite = r != 1;
    job.parallel[r]->reduce(mine);
    try {
      job.trainers[r]->apply(s, 0.0);
    } catch (const Error& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(errors[r].find("the loss is not finite"), std::string::npos)
        << "rank " << r << ": " << errors[r];
    EXPECT_EQ(weights(*job.trainers[r]), before) << "rank " << r;
  }
}

// Two minibatches a batch: every rank makes the same two reduce calls, the
// rank with no batch too, and the replicas end equal, with the steps one
// learner takes alone on the only batch (each minibatch's gradient through
// the all-reduce: ·n / n, so float32-close, not bitwise).
TEST(DataParallelTest, MinibatchesWithOneRankWithoutABatchKeepTheReplicasEqual) {
  Job job(2, "mean", [](int) { return uint64_t{7}; }, {"learner.minibatches=2"});
  torch::manual_seed(7);
  Trainer alone(job.config, cartpole());
  const Batch b = random_batch(4, 600);
  const std::vector<float> before = weights(*job.trainers[0]);
  std::vector<ClusterStep> steps(2);
  std::vector<StepStats> stats(2);
  job.on_every_rank([&](int r) {
    steps[r] = job.parallel[r]->learn(r == 0 ? &b : nullptr, LocalStep{}, 0.0, stats[r]);
  });
  const StepStats want = alone.learn(b, 0.0);
  const std::vector<float> expected = weights(alone);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(steps[r].samples, samples_of(b)) << "rank " << r;
    EXPECT_EQ(stats[r].optimizer_steps, 2) << "rank " << r;
    EXPECT_EQ(weights(*job.trainers[r]), weights(*job.trainers[0])) << "rank " << r;
  }
  EXPECT_NE(weights(*job.trainers[0]), before);
  EXPECT_EQ(want.optimizer_steps, 2);
  const std::vector<float> got = weights(*job.trainers[0]);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-5) << "weight " << i;
  }
}

// run.deterministic's vote before a step: ready only when every rank holds
// its batch; a stop (and a stop without a checkpoint) on one rank reaches all.
TEST(DataParallelTest, TheReadinessVoteNeedsEveryRanksBatchAndCarriesAStop) {
  Job job(3, "mean");
  struct Round {
    std::vector<int> ready, stop, stop_now;
    bool all_ready, any_stop, any_stop_now;
  };
  for (const Round& round : {Round{{1, 1, 0}, {0, 0, 0}, {0, 0, 0}, false, false, false},
                             Round{{1, 1, 1}, {0, 0, 0}, {0, 0, 0}, true, false, false},
                             Round{{0, 0, 0}, {0, 1, 0}, {0, 0, 0}, false, true, false},
                             Round{{1, 0, 1}, {0, 0, 1}, {0, 0, 1}, false, true, true}}) {
    std::vector<DataParallel::Readiness> got(3);
    job.on_every_rank([&](int r) {
      got[r] = job.parallel[r]->agree_ready(round.ready[r] != 0, round.stop[r] != 0,
                                            round.stop_now[r] != 0);
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(got[r].all_ready, round.all_ready) << "rank " << r;
      EXPECT_EQ(got[r].stop, round.any_stop) << "rank " << r;
      EXPECT_EQ(got[r].stop_now, round.any_stop_now) << "rank " << r;
    }
  }
}

// model.normalize_observations: rank 0's statistics (a resumed run's) reach
// every rank at start; then each batch's step takes every rank's
// observations in (rank 1 has no batch), the same on every rank bit for bit,
// and equal to the pooled float64 mean and variance of everything seen, the
// resumed statistics counted as their count of observations.
TEST(DataParallelTest, ObservationStatisticsTakeInEveryRanksBatch) {
  Job job(3, "mean", [](int) { return uint64_t{7}; }, {"model.normalize_observations=true"});
  ObservationStats resumed(4);
  resumed.count = 1000;
  resumed.mean = {1, -2, 0.5, 3};
  resumed.var = {4, 0.25, 1, 9};
  job.trainers[0]->restore_observation_stats(resumed);
  std::vector<RunCounters> counters(3);
  job.on_every_rank([&](int r) { job.parallel[r]->share_initial_state(counters[r]); });
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(*job.trainers[r]->observation_stats(), resumed) << "rank " << r;
  }

  std::vector<Batch> batches = {random_batch(4, 21), Batch{}, random_batch(6, 23)};
  batches[2].obs = batches[2].obs * 5 + 40;  // far from rank 0's and the resumed mean
  std::vector<StepStats> stats(3);
  job.on_every_rank([&](int r) {
    job.parallel[r]->learn(r == 1 ? nullptr : &batches[r], LocalStep{}, 0.0, stats[r]);
  });
  const ObservationStats got = *job.trainers[0]->observation_stats();
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(*job.trainers[r]->observation_stats(), got) << "rank " << r;
    EXPECT_TRUE(job.trainers[r]->model()->observation_mean().equal(
        job.trainers[0]->model()->observation_mean()))
        << "rank " << r << "'s model normalises with other statistics";
    EXPECT_EQ(weights(*job.trainers[r]), weights(*job.trainers[0])) << "rank " << r;
  }
  // Rows 1..T of each column are the batch's own observations.
  const at::Tensor rows = torch::cat({batches[0].obs.slice(0, 1).reshape({-1, 4}),
                                      batches[2].obs.slice(0, 1).reshape({-1, 4})})
                              .to(at::kDouble);
  const double n = static_cast<double>(rows.size(0));
  EXPECT_EQ(got.count, 1000 + n);
  for (int64_t j = 0; j < 4; ++j) {
    const at::Tensor x = rows.select(1, j);
    const double m0 = resumed.mean[j], v0 = resumed.var[j];
    const double mean = (1000 * m0 + x.sum().item<double>()) / (1000 + n);
    const double var =
        (1000 * (v0 + (m0 - mean) * (m0 - mean)) + (x - mean).pow(2).sum().item<double>()) /
        (1000 + n);
    EXPECT_NEAR(got.mean[j], mean, 1e-12 * (1 + std::abs(mean))) << j;
    EXPECT_NEAR(got.var[j], var, 1e-12 * var) << j;
  }
}

}  // namespace
}  // namespace pronghorn::learner
