// Several learners training one model, data-parallel (docs/architecture.md
// §2): each rank learns on its own node's batches and the ranks sum their
// gradients in one all-reduce per optimizer step (learner.epochs ×
// learner.minibatches of them per batch), so every replica takes the same
// optimizer steps and stays identical. With model.normalize_observations a
// batch starts with one more call, which gives every rank every rank's
// observation moments: the statistics take in the concatenated batch (merged
// rank by rank, the same on every rank bit for bit).
//
// The step's one collective call carries, after the flat gradients, each
// rank's sample count n, its votes and its status row:
// [g·n, n, stop, stop now, target, its return, rows of every rank]. Divided by the
// total n, the gradient is the one of the concatenated batch (loss.reduction
// = "mean"; with "sum" the gradients add). A rank with no batch within
// distributed.batch_wait_ms enters with n = 0, so slow actors on one node hold
// nobody back; when the total is 0 every rank skips the step together. The
// votes end the job on every rank at the same step (a Stop request, SIGTERM,
// the target reached on one rank's episodes). Every rank makes the same
// sequence of calls whatever its batches: that is what keeps them in step.
// Threads: the learner's loop.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/collective.h"
#include "learner/run_counters.h"
#include "learner/trainer.h"

namespace pronghorn::learner {

// One rank's figures for rank 0's status. Every step's all-reduce carries
// them, a few floats per rank beside the gradients, so a row is a step old.
struct RankRow {
  double sps = 0, allreduce_s = 0;
  uint64_t local_env_steps = 0;
  uint32_t actors_alive = 0, actors_desired = 0, ring_occupancy = 0, control_port = 0;
};

// What one rank brings to a step.
struct LocalStep {
  uint64_t samples = 0;  // 0: no batch this step
  bool loss_finite = true;
  bool stop = false;         // asked to stop (Ctrl-C, SIGTERM, pronghorn stop)
  bool stop_now = false;     // and without a checkpoint (pronghorn stop --now)
  bool target = false;       // its episodes reached run.target_return
  double target_return = 0;  // then: its mean return
  RankRow row;               // for rank 0's status
};

// What the ranks decided together in one step.
struct ClusterStep {
  uint64_t samples = 0;       // over every rank; 0: nobody had a batch, nothing applied
  bool stop = false;          // some rank was asked to stop
  bool stop_now = false;      // and one without a checkpoint: rank 0 writes none
  bool target = false;        // some rank's episodes reached run.target_return
  double target_return = 0;   // then: the mean return of the ranks that reached it
  std::vector<RankRow> rows;  // every rank's, by rank
};

class DataParallel {
 public:
  DataParallel(distributed::Collective& collective, Trainer& trainer, bool mean_reduction);

  int rank() const { return collective_.rank(); }
  int world_size() const { return collective_.world_size(); }

  // Rank 0's parameters, optimizer state, observation statistics and
  // counters (the ones a resumed run continues from) on every rank; rank 0's
  // `counters` are read, the others' written.
  void share_initial_state(RunCounters& counters);

  // Sums the gradients trainer.backward() left (or zeros, when `samples` is
  // 0: this rank had no batch) and the votes over every rank, leaving the
  // cluster's gradient in the parameters' .grad. A non-finite local loss
  // poisons the sum, so that every rank's apply() refuses the step together.
  ClusterStep reduce(const LocalStep& mine);

  // run.deterministic: whether every rank holds its batch (`ready`) and
  // whether some rank was asked to stop (and one without a checkpoint), in
  // one small all-reduce. A step waits for all of them, so that each trains
  // on every rank's batch.
  struct Readiness {
    bool all_ready = false;
    bool stop = false;
    bool stop_now = false;
  };
  Readiness agree_ready(bool ready, bool stop, bool stop_now);

  // One batch on every rank together: for each of trainer.steps_per_batch()
  // optimizer steps (learner.epochs × learner.minibatches, the same on every
  // rank), backward on this rank's minibatch (none when `batch` is null: it
  // enters with 0 samples), reduce() and apply(). So every rank makes the
  // same collective calls whether it had a batch or not. `mine` brings the
  // votes and row (its samples are set here). Returns the decisions, with
  // samples over the whole batches; with 0, nobody had a batch and nothing
  // was applied. `stats` gets each step's stats add()ed.
  ClusterStep learn(const Batch* batch, LocalStep mine, double progress, StepStats& stats);

  // FNV-1a 64 of this rank's parameters: equal on every rank between steps.
  uint64_t parameter_checksum();

  // Every check_interval_steps: compares every rank's parameter checksum with
  // rank 0's; a difference is logged and repaired by a re-broadcast of rank
  // 0's parameters, optimizer state and observation statistics. Returns whether it repaired.
  bool check_replicas(uint64_t learner_step);

 private:
  void broadcast_model();  // parameters, optimizer state, observation statistics
  // model.normalize_observations: every rank's batch's observations (none
  // when `batch` is null) into every rank's statistics.
  void merge_observation_moments(const Batch* batch);
  void broadcast_host(void* data, size_t bytes);  // from rank 0
  void all_reduce_host(std::span<int64_t> data);

  distributed::Collective& collective_;
  Trainer& trainer_;
  const bool mean_;
  std::vector<at::Tensor> params_;
  int64_t count_ = 0;  // parameters
  at::Tensor flat_;    // [count + tail + rows] on the collective's device
};

}  // namespace pronghorn::learner
