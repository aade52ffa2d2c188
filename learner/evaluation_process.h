// The learner's evaluation process (docs/architecture.md §4): `pronghorn
// evaluation-process`, started through fleet/ as actors are, the first time
// an evaluation is asked for, and kept: an evaluation then costs its
// episodes, not a process's start (a fresh one took 40-120 ms more per
// CartPole evaluation, measured; BENCHMARKS.md). The two talk over a local
// socket (fleet/local_socket.h): the learner sends the path of a snapshot
// (a checkpoint file), the process answers with its returns
// (actor::format_evaluation) and a line "end".
//
// Its own process, so that an env that crashes only at evaluation's batch
// size cannot take the learner down: its death is an Error naming the env
// and how the process ended, and the job ends with it (exit 1), as with
// crashing actors. Its stderr passes through the learner's, line by line.
// Threads: one (the evaluator's).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "actor/evaluation.h"
#include "fleet/actor_output.h"

namespace pronghorn::learner {

class EvaluationProcess {
 public:
  // How long the process may take to start and connect (LibTorch's start-up
  // alone is 0.8 s on 2 cores when it is executed afresh).
  static constexpr std::chrono::seconds kStartTimeout{60};
  static constexpr std::chrono::seconds kStopGrace{3};

  // `program` evaluating the config at `config_path`; `env` names the env in
  // errors ("env plugin PATH (env \"NAME\"), 10 envs at once").
  EvaluationProcess(std::string program, std::string config_path, std::string env);
  ~EvaluationProcess();  // SIGTERM, SIGKILL after kStopGrace; reaped
  EvaluationProcess(const EvaluationProcess&) = delete;
  EvaluationProcess& operator=(const EvaluationProcess&) = delete;

  // The returns of the policy in `snapshot`, taken at `env_steps` (for
  // errors). Stops the process and returns a cancelled Evaluation once
  // `cancel` is set. Throws Error when the process dies or cannot start.
  actor::Evaluation evaluate(const std::string& snapshot, uint64_t env_steps,
                             const std::atomic<bool>& cancel);

 private:
  void start(uint64_t env_steps, const std::atomic<bool>& cancel);
  int stop();  // the wait status
  // Reaps the process if it has ended: false while it runs.
  bool reaped(int& status);
  [[noreturn]] void died(int status, uint64_t env_steps);

  const std::string program_, config_path_, env_;
  pid_t pid_ = -1;       // -1: not running
  pid_t last_pid_ = -1;  // the one last reaped, for its error line
  int listener_ = -1, socket_ = -1;
  fleet::ActorOutput output_;
};

}  // namespace pronghorn::learner
