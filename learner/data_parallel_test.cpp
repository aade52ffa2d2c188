// Several learners as threads of one process, each with its own Trainer and
// GlooCollective over a TCPStore on 127.0.0.1: the weighted all-reduce gives
// every rank the gradient one learner computes on the concatenated batch, the
// replicas stay bit-identical, a diverged replica is repaired, and the votes
// and a non-finite loss reach every rank.
//
// The model, the kernels and the all-reduce buffer are float32 (the kernels
// take float32 only); float64 is used where the test computes: the weighted
// combination of the ranks' own gradients it checks the reduce against, and
// every error measure (expect_concatenated_gradient says which bound is which).
#include "learner/data_parallel.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "distributed/gloo_collective.h"
#include "distributed/testing/two_ranks.h"
#include "envs/env.h"
#include "learner/trainer.h"

namespace pronghorn::learner {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kT = 5;

Config cartpole_config(const std::string& reduction) {
  return load_config("", {"learner.device=cpu", "loss.reduction=" + reduction});
}

EnvSpec cartpole() {
  for (const EnvSpec& s : envs::builtin_env_specs()) {
    if (s.name == "cartpole") return s;
  }
  throw Error("no cartpole");
}

// T = kT steps of N CartPole-shaped envs from `seed`: random observations,
// actions, rewards, episode ends and behaviour log-probs, so that every term
// of the loss has a gradient that differs between columns.
Batch random_batch(int64_t N, uint64_t seed) {
  torch::manual_seed(seed);
  Batch b;
  b.obs = torch::randn({kT + 1, N, 4});
  b.actions = torch::randint(0, 2, {kT, N}, torch::kLong);
  b.rewards = torch::randn({kT, N});
  b.discounts =
      torch::where(torch::rand({kT, N}) < 0.2, torch::zeros({kT, N}), torch::full({kT, N}, 0.99f));
  b.truncated = torch::zeros({kT, N}, torch::kByte);
  b.final_values = torch::zeros({kT, N});
  b.behaviour_log_probs = torch::log(torch::rand({kT, N}) * 0.8 + 0.1);
  return b;
}

// The batches side by side along N (obs [T+1, N, ...], the rest [T, N]).
Batch concatenated(const std::vector<Batch>& batches) {
  auto cat = [&](at::Tensor Batch::*field) {
    std::vector<at::Tensor> parts;
    for (const Batch& b : batches) parts.push_back(b.*field);
    return torch::cat(parts, 1);
  };
  Batch all;
  all.obs = cat(&Batch::obs);
  all.actions = cat(&Batch::actions);
  all.rewards = cat(&Batch::rewards);
  all.discounts = cat(&Batch::discounts);
  all.truncated = cat(&Batch::truncated);
  all.final_values = cat(&Batch::final_values);
  all.behaviour_log_probs = cat(&Batch::behaviour_log_probs);
  return all;
}

uint64_t samples_of(const Batch& b) { return static_cast<uint64_t>(b.rewards.numel()); }

std::vector<float> weights(Trainer& t) {
  std::vector<float> flat(t.model()->parameter_count());
  t.model()->write_flat(flat.data());
  return flat;
}

// Adam's state, parameter by parameter in order: its step count and both
// moments. The serialised state itself differs between equal optimizers (it
// keys each parameter by its address), so it is loaded into an Adam over
// copies of the parameters and read back from there.
std::vector<float> adam_state(Trainer& t) {
  std::vector<at::Tensor> copies;
  for (const at::Tensor& p : t.model()->parameters()) copies.push_back(p.detach().clone());
  torch::optim::Adam adam(copies);
  torch::serialize::InputArchive archive;
  std::istringstream in(t.optimizer_state());
  archive.load_from(in);
  adam.load(archive);
  std::vector<float> flat;
  for (const at::Tensor& p : copies) {
    auto found = adam.state().find(c10::guts::to_string(p.unsafeGetTensorImpl()));
    if (found == adam.state().end()) continue;  // before the first step
    auto& state = static_cast<torch::optim::AdamParamState&>(*found->second);
    flat.push_back(static_cast<float>(state.step()));
    for (const at::Tensor& m : {state.exp_avg(), state.exp_avg_sq()}) {
      const at::Tensor c = m.contiguous();
      flat.insert(flat.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
  }
  return flat;
}

std::vector<at::Tensor> gradients(Trainer& t) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : t.model()->parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().detach().clone() : at::Tensor());
  }
  return grads;
}

// Largest |got − want| over each parameter, divided by that parameter's
// largest |want|: the worst relative error of `got` against `want`.
double worst_relative_error(const std::vector<at::Tensor>& got,
                            const std::vector<at::Tensor>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const at::Tensor g = got[i].to(at::kDouble), w = want[i].to(at::kDouble);
    const double scale = w.abs().max().item<double>();
    EXPECT_GT(scale, 0) << "parameter " << i << " has no reference gradient to compare with";
    worst = std::max(worst, (g - w).abs().max().item<double>() / scale);
  }
  return worst;
}

// ‖got − want‖₂ / ‖want‖₂ over every parameter, in double.
double norm_relative_error(const std::vector<at::Tensor>& got,
                           const std::vector<at::Tensor>& want) {
  double difference = 0, reference = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const at::Tensor w = want[i].to(at::kDouble);
    difference += (got[i].to(at::kDouble) - w).pow(2).sum().item<double>();
    reference += w.pow(2).sum().item<double>();
  }
  EXPECT_GT(reference, 0) << "no reference gradient to compare with";
  return std::sqrt(difference / reference);
}

// The ranks of one job as threads: a rendezvous, a GlooCollective, a Trainer
// (every one from the same seed unless told) and a DataParallel each.
struct Job {
  Config config;
  std::vector<std::unique_ptr<distributed::Rendezvous>> rendezvous;
  std::vector<std::unique_ptr<distributed::GlooCollective>> collectives;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::unique_ptr<DataParallel>> parallel;

  Job(
      int world, const std::string& reduction,
      const std::function<uint64_t(int)>& seed_of = [](int) { return uint64_t{7}; })
      : config(cartpole_config(reduction)) {
    rendezvous.resize(world);
    collectives.resize(world);
    std::future<std::unique_ptr<distributed::Rendezvous>> rank0;
    const int port =
        distributed::testing::start_rank0(distributed::testing::rank_options(0, world, 0), rank0);
    if (port < 0) throw Error("rank 0's store did not listen within 10 s");
    // Every rank's constructor waits for the others: each in its own thread.
    std::vector<std::future<std::unique_ptr<distributed::Rendezvous>>> others;
    for (int r = 1; r < world; ++r) {
      others.push_back(std::async(std::launch::async, [=] {
        return std::make_unique<distributed::Rendezvous>(
            distributed::testing::rank_options(r, world, port));
      }));
    }
    rendezvous[0] = rank0.get();
    for (int r = 1; r < world; ++r) rendezvous[r] = others[r - 1].get();
    on_every_rank([&](int r) {
      distributed::Rendezvous& rv = *rendezvous[r];
      collectives[r] = std::make_unique<distributed::GlooCollective>(
          rv.prefixed("gloo"),
          distributed::GlooOptions{.rank = r,
                                   .world_size = world,
                                   .bind_address = "127.0.0.1",
                                   .timeout = 10s,
                                   .lost_peers = [&rv] { return rv.lost_peers(); }});
    });
    const bool mean = config.loss.reduction == LossConfig::Reduction::kMean;
    for (int r = 0; r < world; ++r) {
      torch::manual_seed(seed_of(r));
      trainers.push_back(std::make_unique<Trainer>(config, cartpole()));
      parallel.push_back(std::make_unique<DataParallel>(*collectives[r], *trainers[r], mean));
    }
  }

  int world() const { return static_cast<int>(trainers.size()); }

  // `work(rank)` in one thread per rank, as the ranks' learner loops; the
  // first exception is rethrown once every rank has returned (each call has
  // the collective's deadline, so none hangs).
  void on_every_rank(const std::function<void(int)>& work) {
    std::vector<std::future<void>> ranks;
    for (int r = 0; r < static_cast<int>(rendezvous.size()); ++r) {
      ranks.push_back(std::async(std::launch::async, work, r));
    }
    std::exception_ptr first;
    for (auto& rank : ranks) {
      try {
        rank.get();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // reduce() on every rank with `samples[r]` and no votes.
  std::vector<ClusterStep> reduce(const std::vector<uint64_t>& samples) {
    std::vector<ClusterStep> steps(world());
    on_every_rank(
        [&](int r) { steps[r] = parallel[r]->reduce(samples[r], true, false, false, 0); });
    return steps;
  }
};

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

// One step of every rank: backward on its own batch, reduce, apply.
void step_together(Job& job, uint64_t seed) {
  std::vector<Batch> batches;  // made here: the threads would race on the generator
  for (int r = 0; r < job.world(); ++r) batches.push_back(random_batch(3 + r, seed + r));
  job.on_every_rank([&](int r) {
    const Batch& b = batches[r];
    StepStats s = job.trainers[r]->backward(b);
    job.parallel[r]->reduce(samples_of(b), true, false, false, 0);
    job.trainers[r]->apply(s, 0.0);
  });
}

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
  std::vector<SharedCounters> counters(2);
  counters[0] = {.env_steps = 1234, .learner_steps = 56, .episodes = 78, .policy_version = 57};
  counters[1] = {.env_steps = 1, .learner_steps = 2, .episodes = 3, .policy_version = 4};
  job.on_every_rank([&](int r) { job.parallel[r]->share_initial_state(counters[r]); });
  EXPECT_EQ(weights(*job.trainers[1]), weights(*job.trainers[0]));
  ASSERT_FALSE(adam_state(*job.trainers[0]).empty());
  EXPECT_EQ(adam_state(*job.trainers[1]), adam_state(*job.trainers[0]));
  for (const SharedCounters& c : counters) {
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
    steps[r] = job.parallel[r]->reduce(0, true, r == 1, r != 1, r == 0 ? 100.0 : 250.0);
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(steps[r].samples, 0u) << "rank " << r;
    EXPECT_TRUE(steps[r].stop) << "rank " << r;
    EXPECT_TRUE(steps[r].target) << "rank " << r;
    EXPECT_DOUBLE_EQ(steps[r].target_return, 175.0) << "rank " << r;
  }
  // Nobody votes: no stop, no target.
  job.on_every_rank([&](int r) { steps[r] = job.parallel[r]->reduce(0, true, false, false, 99); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(steps[r].stop) << "rank " << r;
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
    job.parallel[r]->reduce(samples_of(b), /*local_loss_finite=*/r != 1, false, false, 0);
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

}  // namespace
}  // namespace pronghorn::learner
