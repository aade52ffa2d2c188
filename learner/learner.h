// The learner (docs/architecture.md §1, §3): take B unrolls from the ring →
// view them as [T+1, B·K] tensors → model forward → V-trace (or GAE) → fused
// loss → backward → clip → optimizer → publish weights to the slab → release.
// Learner::run() does it with the supervisor of this node's actors, reports
// metrics, checkpoints every run.checkpoint_interval_s and at a clean stop,
// evaluates the greedy policy on its own thread (learner/evaluator.h), and
// stops at run.total_steps or when an evaluation reaches run.target_return.
// It is steered through a ControlBoard, which the control plane (control/)
// serves; the learner itself knows no network.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"
#include "distributed/collective.h"
#include "learner/control_board.h"
#include "learner/remote_actors.h"

namespace pronghorn::learner {

struct TrainOptions {
  Config config;
  EnvSpec env;          // the env config.env names, from check_job_config()
  std::string run_dir;  // exists; config.toml is written there first
  bool resume = false;  // continue from the newest valid checkpoint in run_dir/checkpoints
  // Several learners (docs/architecture.md §2): this rank's side of the
  // job's collective, nullptr for a learner alone. Rank 0 reads the
  // checkpoint and writes them; every rank starts from rank 0's state. On
  // ranks > 0 run_dir is their own <run>/ranks/<r>.
  distributed::Collective* collective = nullptr;
  std::string node_name;                // this rank's
  std::vector<std::string> rank_nodes;  // rank 0: every rank's node name and the host of its
  std::vector<std::string> rank_hosts;  // control plane ("" if unreachable), by rank
  // Set: actor-only nodes may join (remote.address); called once the ring
  // and the first weights exist.
  RemoteActorsFactory remote_actors;
};

// Where the run ended: the same figures as its last metrics.jsonl line and
// its last checkpoint.
struct TrainResult {
  uint64_t env_steps = 0;  // trained on (since the run began, across resumes)
  uint64_t learner_steps = 0;
  double seconds = 0;
  double return_mean = 0;  // over the last 100 training episodes
  // The last evaluation (NaN and 0 without one); reached_target: its mean
  // reached run.target_return.
  double eval_return_mean = 0;
  uint64_t eval_episodes = 0;
  bool reached_target = false;
};

class Learner {
 public:
  // Sets the job up (the env probed, ring and weight slab created, the model
  // built or resumed) and publishes its first status on `board`. Throws
  // Error (or UsageError) when it cannot: nothing has started then.
  Learner(const TrainOptions& options, ControlBoard& board, const std::atomic<bool>& stop);
  // Leaves no actor process and no shared-memory segment behind, and answers
  // every request still queued on the board.
  ~Learner();

  // Starts the actors and trains until done, a Stop request, or `stop` is
  // set (SIGINT/SIGTERM).
  TrainResult run();

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace pronghorn::learner
