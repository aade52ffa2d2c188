// The learner's periodic evaluation (docs/architecture.md §4): a snapshot
// of the learner's state → its own thread, its own model and envs →
// evaluate_policy (greedy, run.eval_episodes episodes, evaluation_seed) →
// the result, and `checkpoints/best.ckpt` when it beats every earlier one.
// Training never waits for it: start() hands over a copy and returns, and a
// snapshot offered while one is being evaluated is refused.
//
// best.ckpt is a whole checkpoint (learner/checkpoint.h: optimizer and RNG
// state too, so it loads and resumes as any other), written atomically; its
// name is not a checkpoint's `env-steps-N.ckpt`, so pruning the last N
// never removes it and a resume never mistakes it for the newest. Beside it,
// best.json holds the evaluation that chose it, so a resumed run replaces
// it only with a better one.
// Threads: start(), take(), busy() and the destructor from one thread (the
// learner's); the evaluation runs on the evaluator's own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/config.h"
#include "core/env_spec.h"
#include "learner/checkpoint.h"
#include "learner/evaluation.h"
#include "model/policy.h"

namespace pronghorn::learner {

// One finished evaluation, of the policy at `env_steps`.
struct EvalReport {
  Evaluation result;
  uint64_t env_steps = 0;  // of the snapshot evaluated
  bool new_best = false;   // best.ckpt now holds this policy
  std::string best_error;  // set: it was the best, and best.ckpt could not be written
};

// The best evaluation recorded in `folder` (best.json beside best.ckpt), or
// -infinity when there is none.
double recorded_best_return(const std::string& folder);

class Evaluator {
 public:
  // Evaluates `episodes` episodes of `config.env` (a model of `spec` and
  // `config.model`); best.ckpt goes in `checkpoints` (created if missing).
  Evaluator(const Config& config, const EnvSpec& spec, std::string checkpoints);
  // Cancels an evaluation under way and joins the thread.
  ~Evaluator();
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;

  // Starts evaluating `snapshot`'s parameters; false (and nothing done) while
  // an evaluation, or a report not yet taken, is pending.
  bool start(Checkpoint snapshot);
  bool busy() const { return state_.load() != State::kIdle; }
  // The finished evaluation, once (then the evaluator is idle). Rethrows
  // what the evaluation threw (an env's Error).
  std::optional<EvalReport> take();

 private:
  enum class State { kIdle, kRunning, kDone };
  void loop();
  void evaluate();

  const Config config_;
  const EnvSpec spec_;
  PolicyNet model_;  // the evaluator thread's, on the CPU; built by the constructor
  const std::string checkpoints_;
  double best_ = -std::numeric_limits<double>::infinity();  // evaluator thread only
  std::atomic<State> state_{State::kIdle};
  std::atomic<bool> cancel_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool quit_ = false;           // guarded by mutex_
  Checkpoint snapshot_;         // owned by the evaluator thread while kRunning
  EvalReport report_;           // written by it, read once kDone
  std::exception_ptr failure_;  // likewise
  std::thread thread_;          // last: started once the rest exists
};

}  // namespace pronghorn::learner
