#include "learner/data_parallel.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/clock.h"
#include "core/error.h"
#include "core/fnv.h"

namespace pronghorn::learner {
namespace {

// The tail of the all-reduce buffer, after the gradients.
constexpr int64_t kSamples = 0, kStopVotes = 1, kStopNowVotes = 2, kTargetVotes = 3,
                  kTargetReturns = 4, kTail = 5;

std::span<std::byte> bytes_of(void* data, size_t n) { return {static_cast<std::byte*>(data), n}; }

// A RankRow as floats, each exact: counts up to 2^24, larger ones in two
// halves. Rank r's row sits at r·kRowFloats; the others' rows are zeros.
constexpr int64_t kRowFloats = 8;
constexpr double kHalf = 1 << 24;

void write_row(const RankRow& row, float* out) {
  const double steps = static_cast<double>(row.local_env_steps);
  const float values[kRowFloats] = {static_cast<float>(row.sps),
                                    static_cast<float>(row.allreduce_s),
                                    static_cast<float>(std::floor(steps / kHalf)),
                                    static_cast<float>(std::fmod(steps, kHalf)),
                                    static_cast<float>(row.actors_alive),
                                    static_cast<float>(row.actors_desired),
                                    static_cast<float>(row.ring_occupancy),
                                    static_cast<float>(row.control_port)};
  std::copy(values, values + kRowFloats, out);
}

RankRow read_row(const float* in) {
  const auto count = [](float f) { return static_cast<uint32_t>(std::lround(f)); };
  return {.sps = in[0],
          .allreduce_s = in[1],
          .local_env_steps = static_cast<uint64_t>(std::llround(in[2] * kHalf + in[3])),
          .actors_alive = count(in[4]),
          .actors_desired = count(in[5]),
          .ring_occupancy = count(in[6]),
          .control_port = count(in[7])};
}

// Floats count samples exactly up to 2^24 per step.
constexpr double kMaxExactSamples = 1 << 24;

}  // namespace

DataParallel::DataParallel(distributed::Collective& collective, Trainer& trainer,
                           bool mean_reduction)
    : collective_(collective),
      trainer_(trainer),
      mean_(mean_reduction),
      params_(trainer.model()->parameters()) {
  for (const at::Tensor& p : params_) count_ += p.numel();
  // Gloo reduces CPU memory; NCCL the device's (nccl_collective.h).
  const at::Device device = collective.backend() == "nccl" ? trainer.device() : at::kCPU;
  const int64_t rows = kRowFloats * collective.world_size();
  flat_ = torch::zeros({count_ + kTail + rows},
                       torch::TensorOptions().dtype(at::kFloat).device(device));
}

ClusterStep DataParallel::reduce(const LocalStep& mine) {
  const uint64_t samples = mine.samples;
  PRONGHORN_ASSERT(static_cast<double>(samples) * world_size() < kMaxExactSamples,
                   "checked at start (learner.cpp): a step's samples over every rank < 2^24");
  at::NoGradGuard no_grad;
  const float weight = mean_ ? static_cast<float>(samples) : 1.0f;
  int64_t offset = 0;
  for (const at::Tensor& p : params_) {
    at::Tensor slot = flat_.slice(0, offset, offset + p.numel());
    if (samples == 0 || !p.grad().defined()) {
      slot.zero_();
    } else if (!mine.loss_finite) {
      slot.fill_(std::numeric_limits<float>::quiet_NaN());
    } else {
      slot.copy_(p.grad().flatten()).mul_(weight);
    }
    offset += p.numel();
  }
  at::Tensor tail = flat_.slice(0, count_, count_ + kTail);
  const auto vote = [](bool yes) { return yes ? 1.0f : 0.0f; };
  tail.copy_(torch::tensor({static_cast<float>(samples), vote(mine.stop), vote(mine.stop_now),
                            vote(mine.target),
                            mine.target ? static_cast<float>(mine.target_return) : 0.0f}));
  std::vector<float> rows(static_cast<size_t>(kRowFloats * world_size()), 0.0f);
  write_row(mine.row, rows.data() + kRowFloats * rank());
  at::Tensor row_block = flat_.slice(0, count_ + kTail);
  row_block.copy_(torch::from_blob(rows.data(), {static_cast<int64_t>(rows.size())}));
  if (flat_.is_cuda()) torch::cuda::synchronize();  // NCCL runs on a stream of its own
  collective_.all_reduce_sum(std::span<float>(flat_.data_ptr<float>(), flat_.numel()));
  const at::Tensor totals = tail.cpu();
  const at::Tensor summed_rows = row_block.cpu();
  ClusterStep step;
  for (int r = 0; r < world_size(); ++r) {
    step.rows.push_back(read_row(summed_rows.data_ptr<float>() + kRowFloats * r));
  }
  step.samples = static_cast<uint64_t>(std::llround(totals[kSamples].item<double>()));
  step.stop = totals[kStopVotes].item<float>() > 0;
  step.stop_now = totals[kStopNowVotes].item<float>() > 0;
  const float target_votes = totals[kTargetVotes].item<float>();
  step.target = target_votes > 0;
  if (step.target) step.target_return = totals[kTargetReturns].item<double>() / target_votes;
  if (step.samples == 0) return step;
  const float scale = mean_ ? 1.0f / static_cast<float>(step.samples) : 1.0f;
  offset = 0;
  for (at::Tensor& p : params_) {
    at::Tensor sum = flat_.slice(0, offset, offset + p.numel()).view_as(p).to(p.device());
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    p.mutable_grad().copy_(sum).mul_(scale);
    offset += p.numel();
  }
  return step;
}

ClusterStep DataParallel::learn(const Batch* batch, LocalStep mine, double progress,
                                StepStats& stats) {
  const int64_t steps = trainer_.steps_per_batch();
  const int64_t minibatches = steps / trainer_.epochs();
  if (trainer_.observation_stats() != nullptr) merge_observation_moments(batch);
  if (batch != nullptr) trainer_.start_batch(*batch, Trainer::ObservationUpdate::kMerged);
  mine.samples = batch != nullptr ? static_cast<uint64_t>(batch->rewards.numel() / minibatches) : 0;
  ClusterStep cluster;
  for (int64_t i = 0; i < steps; ++i) {
    StepStats s = batch != nullptr ? trainer_.backward_step(i) : StepStats{};
    mine.loss_finite = std::isfinite(s.total);
    const auto reduce_start = std::chrono::steady_clock::now();
    cluster = reduce(mine);
    s.allreduce_s = seconds_since(reduce_start);
    // The same on every rank, and at the first step: every rank's batch or
    // none lasts the whole plan.
    if (cluster.samples == 0) {
      stats.allreduce_s += s.allreduce_s;
      return cluster;
    }
    trainer_.apply(s, progress);
    stats.add(s);
  }
  cluster.samples *= static_cast<uint64_t>(minibatches);
  return cluster;
}

DataParallel::Readiness DataParallel::agree_ready(bool ready, bool stop, bool stop_now) {
  int64_t votes[3] = {ready ? 1 : 0, stop ? 1 : 0, stop_now ? 1 : 0};
  all_reduce_host(std::span<int64_t>(votes));
  return {.all_ready = votes[0] == world_size(), .stop = votes[1] > 0, .stop_now = votes[2] > 0};
}

// Every rank's moments, bit for bit: rank r's doubles go into row r of int64
// zeros as their bit patterns, and an integer sum of one value and zeros is
// that value. Each rank then merges the rows in rank order, so every replica
// holds the same statistics, those of all the batches.
void DataParallel::merge_observation_moments(const Batch* batch) {
  const int64_t d = trainer_.observation_stats()->size();
  const size_t row = static_cast<size_t>(1 + 2 * d);
  std::vector<int64_t> bits(row * static_cast<size_t>(world_size()), 0);
  if (batch != nullptr) {
    const ObservationMoments mine = trainer_.observation_moments(*batch);
    std::vector<double> values = {mine.count};
    values.insert(values.end(), mine.mean.begin(), mine.mean.end());
    values.insert(values.end(), mine.m2.begin(), mine.m2.end());
    std::memcpy(bits.data() + row * static_cast<size_t>(rank()), values.data(),
                row * sizeof(double));
  }
  all_reduce_host(std::span<int64_t>(bits));
  std::vector<ObservationMoments> ranks(static_cast<size_t>(world_size()));
  std::vector<double> values(row);
  for (size_t r = 0; r < ranks.size(); ++r) {
    std::memcpy(values.data(), bits.data() + row * r, row * sizeof(double));
    ranks[r].count = values[0];
    ranks[r].mean.assign(values.begin() + 1, values.begin() + 1 + d);
    ranks[r].m2.assign(values.begin() + 1 + d, values.end());
  }
  trainer_.merge_observation_moments(ranks);
}

// NCCL reads and writes device memory only: host data goes through a device
// copy. Gloo takes the host memory as it is.
void DataParallel::broadcast_host(void* data, size_t bytes) {
  if (!flat_.is_cuda()) {
    collective_.broadcast(bytes_of(data, bytes), 0);
    return;
  }
  at::Tensor host = torch::from_blob(data, {static_cast<int64_t>(bytes)}, at::kByte);
  at::Tensor device = host.to(flat_.device());
  torch::cuda::synchronize();
  collective_.broadcast(bytes_of(device.data_ptr(), bytes), 0);
  host.copy_(device.cpu());
}

void DataParallel::all_reduce_host(std::span<int64_t> data) {
  if (!flat_.is_cuda()) {
    collective_.all_reduce_sum(data);
    return;
  }
  at::Tensor host = torch::from_blob(data.data(), {static_cast<int64_t>(data.size())}, at::kLong);
  at::Tensor device = host.to(flat_.device());
  torch::cuda::synchronize();
  collective_.all_reduce_sum(std::span<int64_t>(device.data_ptr<int64_t>(), data.size()));
  host.copy_(device.cpu());
}

void DataParallel::broadcast_model() {
  // Parameters.
  std::vector<float> flat(count_);
  trainer_.model()->write_flat(flat.data());
  broadcast_host(flat.data(), flat.size() * sizeof(float));
  if (rank() != 0) trainer_.model()->read_flat(flat.data());
  // Optimizer state, its length first: it differs between a fresh optimizer
  // and one that has stepped.
  std::string state = rank() == 0 ? trainer_.optimizer_state() : std::string();
  int64_t length = static_cast<int64_t>(state.size());
  broadcast_host(&length, sizeof length);
  state.resize(static_cast<size_t>(length));
  broadcast_host(state.data(), state.size());
  if (rank() != 0) trainer_.load_optimizer_state(state);
  // model.normalize_observations' statistics: count, means, variances.
  if (const ObservationStats* own = trainer_.observation_stats()) {
    ObservationStats stats = *own;
    broadcast_host(&stats.count, sizeof stats.count);
    broadcast_host(stats.mean.data(), stats.mean.size() * sizeof(double));
    broadcast_host(stats.var.data(), stats.var.size() * sizeof(double));
    if (rank() != 0) trainer_.restore_observation_stats(stats);
  }
}

void DataParallel::share_initial_state(RunCounters& counters) {
  broadcast_model();
  broadcast_host(&counters, sizeof counters);
}

uint64_t DataParallel::parameter_checksum() {
  std::vector<float> flat(count_);
  trainer_.model()->write_flat(flat.data());
  return fnv1a(
      std::string_view(reinterpret_cast<const char*>(flat.data()), flat.size() * sizeof(float)));
}

bool DataParallel::check_replicas(uint64_t learner_step) {
  const uint64_t mine = parameter_checksum();
  // Each rank's checksum in its own place; the sum gathers them all.
  std::vector<int64_t> sums(world_size(), 0);
  sums[rank()] = static_cast<int64_t>(mine);
  all_reduce_host(std::span<int64_t>(sums));
  std::vector<int> differing;
  for (int r = 1; r < world_size(); ++r) {
    if (sums[r] != sums[0]) differing.push_back(r);
  }
  if (differing.empty()) return false;
  spdlog::warn(
      "parameters of rank{} {} differ from rank 0's after learner step {}: rank 0's weights, "
      "optimizer state and observation statistics are broadcast again",
      differing.size() > 1 ? "s" : "", fmt::join(differing, ", "), learner_step);
  broadcast_model();
  return true;
}

}  // namespace pronghorn::learner
