// The ranks of one data-parallel job as threads of the test process (a
// Rendezvous, a GlooCollective over a TCPStore on 127.0.0.1, a Trainer and a
// DataParallel each), and what the data-parallel tests build and measure with
// them: random CartPole-shaped batches, the weights, Adam's state and the
// gradients of a Trainer, and relative errors between gradients.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "distributed/gloo_collective.h"
#include "distributed/testing/two_ranks.h"
#include "envs/env.h"
#include "learner/data_parallel.h"
#include "learner/trainer.h"
#include "model/optimizer_state.h"

namespace pronghorn::learner::testing {

inline constexpr int64_t kT = 5;  // steps per batch

inline Config cartpole_config(const std::string& reduction,
                              const std::vector<std::string>& more = {}) {
  std::vector<std::string> overrides = {"learner.device=cpu", "loss.reduction=" + reduction};
  overrides.insert(overrides.end(), more.begin(), more.end());
  return load_config("", overrides);
}

inline EnvSpec cartpole() {
  for (const EnvSpec& s : envs::builtin_env_specs()) {
    if (s.name == "cartpole") return s;
  }
  throw Error("no cartpole");
}

// T = kT steps of N CartPole-shaped envs from `seed`: random observations,
// actions, rewards, episode ends and behaviour log-probs, so that every term
// of the loss has a gradient that differs between columns.
inline Batch random_batch(int64_t N, uint64_t seed) {
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
inline Batch concatenated(const std::vector<Batch>& batches) {
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

inline uint64_t samples_of(const Batch& b) { return static_cast<uint64_t>(b.rewards.numel()); }

inline std::vector<float> weights(Trainer& t) {
  std::vector<float> flat(t.model()->parameter_count());
  t.model()->write_flat(flat.data());
  return flat;
}

// Adam's state, parameter by parameter in order: its step count and both
// moments. The serialised state itself differs between equal optimizers (it
// keys each parameter by its address), so it is loaded into an Adam over
// copies of the parameters and read back from there.
inline std::vector<float> adam_state(Trainer& t) {
  std::vector<at::Tensor> copies;
  for (const at::Tensor& p : t.model()->parameters()) copies.push_back(p.detach().clone());
  torch::optim::Adam adam(copies);
  torch::serialize::InputArchive archive;
  std::istringstream in(t.optimizer_state());
  archive.load_from(in);
  adam.load(archive);
  std::vector<float> flat;
  for (const at::Tensor& p : copies) {
    auto found = adam.state().find(optimizer_state_key(p));
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

inline std::vector<at::Tensor> gradients(Trainer& t) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : t.model()->parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().detach().clone() : at::Tensor());
  }
  return grads;
}

// Largest |got − want| over each parameter, divided by that parameter's
// largest |want|: the worst relative error of `got` against `want`.
inline double worst_relative_error(const std::vector<at::Tensor>& got,
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
inline double norm_relative_error(const std::vector<at::Tensor>& got,
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

// A rank's side of a step with `samples` and no votes.
inline LocalStep with_samples(uint64_t samples) {
  LocalStep mine;
  mine.samples = samples;
  return mine;
}

// The ranks of one job as threads: a rendezvous, a GlooCollective, a Trainer
// (every one from the same seed unless told) and a DataParallel each, with
// the config's `overrides`.
struct Job {
  Config config;
  std::vector<std::unique_ptr<distributed::Rendezvous>> rendezvous;
  std::vector<std::unique_ptr<distributed::GlooCollective>> collectives;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::unique_ptr<DataParallel>> parallel;

  Job(
      int world, const std::string& reduction,
      const std::function<uint64_t(int)>& seed_of = [](int) { return uint64_t{7}; },
      const std::vector<std::string>& overrides = {})
      : config(cartpole_config(reduction, overrides)) {
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
                                   .timeout = std::chrono::seconds(10),
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
    on_every_rank([&](int r) { steps[r] = parallel[r]->reduce(with_samples(samples[r])); });
    return steps;
  }
};

// One step of every rank: backward on its own batch, reduce, apply.
inline void step_together(Job& job, uint64_t seed) {
  std::vector<Batch> batches;  // made here: the threads would race on the generator
  for (int r = 0; r < job.world(); ++r) batches.push_back(random_batch(3 + r, seed + r));
  job.on_every_rank([&](int r) {
    const Batch& b = batches[r];
    StepStats s = job.trainers[r]->backward(b);
    job.parallel[r]->reduce(with_samples(samples_of(b)));
    job.trainers[r]->apply(s, 0.0);
  });
}

}  // namespace pronghorn::learner::testing
