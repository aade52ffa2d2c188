// The learner's periodic evaluation (docs/architecture.md §4): a snapshot
// of the learner's state → `checkpoints/evaluating.ckpt` → the evaluation
// process (learner/evaluation_process.h) runs actor::evaluate_policy on it
// (greedy, run.eval_episodes episodes, evaluation_seed) → the result, and
// the snapshot renamed `best.ckpt` when it beats every earlier one.
// Training never waits for it (but under run.deterministic: Schedule::
// holds_training): start() hands over a copy and returns, and a
// snapshot offered while one is being evaluated is refused. An env that
// crashes the evaluation process (only at evaluation's batch size, say: up
// to 32 envs) is an Error from take() naming it, and the job ends with it as
// with crashing actors (exit 1).
//
// best.ckpt is a whole checkpoint (learner/checkpoint.h: optimizer and RNG
// state too, so it loads and resumes as any other), written atomically; its
// name is not a checkpoint's `env-steps-N.ckpt`, so pruning the last N
// never removes it and a resume never mistakes it for the newest. Beside it,
// best.json holds the evaluation that chose it, so a resumed run replaces
// it only with a better one.
// Threads: start(), take(), busy() and the destructor from one thread (the
// learner's); the evaluator's own waits for the evaluation process.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "actor/evaluation.h"
#include "core/config.h"
#include "fleet/child_process.h"
#include "learner/checkpoint.h"
#include "learner/evaluation_process.h"

namespace pronghorn::learner {

// One finished evaluation, of the policy at `env_steps`.
struct EvalReport {
  actor::Evaluation result;
  uint64_t env_steps = 0;  // of the snapshot evaluated
  bool new_best = false;   // best.ckpt now holds this policy
  std::string best_error;  // set: it was the best, and best.ckpt could not be written
  std::string skipped;     // set: no evaluation ran (its snapshot could not be written)
};

// The best evaluation recorded in `folder` (best.json beside best.ckpt), or
// -infinity when there is none.
double recorded_best_return(const std::string& folder);

class Evaluator {
 public:
  // Evaluates run.eval_episodes episodes of `config` (its file:
  // `config_path`) with `program` (this binary; tests name it); best.ckpt
  // goes in `checkpoints` (created if missing).
  Evaluator(const Config& config, std::string config_path, std::string checkpoints,
            std::string program = fleet::kThisBinary);
  // Cancels an evaluation under way, stops the evaluation process (SIGTERM,
  // SIGKILL after 3 s) and joins the thread.
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Starts evaluating `snapshot`'s parameters; false (and nothing done) while
  // an evaluation, or a report not yet taken, is pending.
  bool start(Checkpoint snapshot);
  bool busy() const { return state_.load() != State::kIdle; }
  // The finished evaluation, once (then the evaluator is idle). Rethrows
  // what the evaluation threw: an Error naming the env when the evaluation
  // process crashed.
  std::optional<EvalReport> take();
  // Waits up to `timeout` until no evaluation runs (take() then has its report).
  void wait(std::chrono::milliseconds timeout);

 private:
  enum class State { kIdle, kRunning, kDone };
  void loop();
  void evaluate();
  void record_best(const std::string& snapshot, EvalReport& report);

  const Config config_;
  const std::string config_path_;
  const std::string checkpoints_;
  EvaluationProcess process_;                               // the evaluator thread's
  double best_ = -std::numeric_limits<double>::infinity();  // evaluator thread only
  std::atomic<State> state_{State::kIdle};
  std::atomic<bool> cancel_{false};
  std::mutex mutex_;
  std::condition_variable wake_;      // the evaluator thread: a snapshot to evaluate
  std::condition_variable finished_;  // wait(): the evaluation reported
  bool quit_ = false;                 // guarded by mutex_
  Checkpoint snapshot_;               // owned by the evaluator thread while kRunning
  EvalReport report_;                 // written by it, read once kDone
  std::exception_ptr failure_;        // likewise
  std::thread thread_;                // last: started once the rest exists
};

}  // namespace pronghorn::learner
