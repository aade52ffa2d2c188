// Envs of the user's own Python (docs/architecture.md §7, docs/envs.md): env.name
// "gymnasium:<id>" (any registered Gymnasium id), "envpool:<task>" (an
// EnvPool task) or "python:<module>:<callable>" (a callable returning a
// Gymnasium env, or a SAME_STEP vector env of env.num_envs / (env.workers ×
// env.splits) envs), with
// env.options as keyword arguments, in the interpreter env.python names.
//
//   actor (this process)                       env workers (env.python)
//   PythonEnv::start ── posix_spawn, W times ─> envs/python/pronghorn_worker.py
//                     <── "spec {…}" + memfd ─ each makes its K/W envs and memory
//   step: actions → each memory, "step" to all > vector step (SAME_STEP), at once
//         obs, rewards, flags ← memory <─ "ok" ─ each writes into its memory
//
// W = env.workers processes per actor (envs/python_worker.h), each stepping
// its share of the K envs while the others step theirs: one process's GIL
// never serialises another's envs. With S = env.splits, each worker holds
// its share of every split (envs/env.h, splits()) as a vector env of its
// own, and steps one split while the actor acts for another:
//
//   rows of the actor: | split 0: worker 0, worker 1 | split 1: worker 0, worker 1 |
//
// The workers load no LibTorch and none of our code; they die with this
// process (PR_SET_PDEATHSIG, and a watch on their parent). Observations
// cross once: from a worker's memory into the caller's buffer (a ring
// slot). Env i of the actor is seeded the same whatever W
// (pronghorn_worker.py documents the seeds).
//
// Errors: a worker's own line. At start (an unknown id, a module that does
// not import, an unsupported space, an interpreter older than 3.10):
// UsageError naming the env and the interpreter. In reset or step (the env
// raised): Error with the exception's last line; the traceback is on
// stderr. A worker that dies: Error naming how. A worker whose env raised
// answers every later command with the same line, so with splits in flight
// the error is still the env's, whichever split's reply comes first.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "envs/env.h"
#include "envs/python_worker.h"

namespace pronghorn::envs {

// The spec of the Python env `config` names, tried as the job's start
// check: its worker (a child process) makes one env within kStartTimeout,
// resets and steps it once, each within `deadline`. Throws as PythonEnv
// does, and Error for a reset or step past its deadline. The spec names the
// env's packages (EnvSpec::packages).
EnvSpec probe_python_env(const EnvConfig& config, std::chrono::milliseconds deadline);

class PythonEnv final : public BatchEnv {
 public:
  // How long the workers may take to import the env's packages and make their envs.
  static constexpr std::chrono::seconds kStartTimeout{120};

  // Starts the workers and takes their spec. Throws as above.
  static std::unique_ptr<PythonEnv> start(const EnvConfig& config, uint64_t seed);
  ~PythonEnv() override;  // the workers exit (PythonWorker's destructor)

  std::string label() const override;
  // Env 0's frame, drawn by its worker (env.options.render_mode =
  // "rgb_array"), within kStartTimeout. Error when the env draws none.
  std::optional<Frame> frame() override;
  // The workers' process ids, in the order of their first rows.
  std::vector<pid_t> worker_pids() const;
  int64_t splits() const override { return static_cast<int64_t>(step_commands_.size()); }

 protected:
  void reset_unchecked(void* obs) override;
  void step_unchecked(const void* actions, const StepOutput& out) override;
  void begin_step_unchecked(int64_t split, const void* actions) override;
  void finish_step_unchecked(int64_t split, const StepOutput& out) override;

 private:
  // One worker and where its rows lie: in each split, `share` rows from
  // `offset` (of split_rows()); in its memory, split s at row s · share.
  struct Placed {
    std::unique_ptr<PythonWorker> worker;
    int64_t offset = 0, share = 0;
  };
  PythonEnv(EnvSpec spec, int64_t num_envs, int64_t splits, std::vector<Placed> workers);
  // Sends `command` to every worker, then awaits every reply.
  void call_all(const char* command);

  std::vector<Placed> workers_;
  std::vector<std::string> step_commands_;  // [S]: "step", or "step s" for each split
  std::vector<std::string> step_labels_;    // [S]: how errors name them
};

}  // namespace pronghorn::envs
