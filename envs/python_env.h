// Envs of the user's own Python (docs/architecture.md §7, docs/envs.md): env.name
// "gymnasium:<id>" (any registered Gymnasium id), "envpool:<task>" (an
// EnvPool task) or "python:<module>:<callable>" (a callable returning a
// Gymnasium env, or a SAME_STEP vector env of env.num_envs envs), with
// env.options as keyword arguments, in the interpreter env.python names.
//
//   actor (this process)                       env worker (env.python)
//   PythonEnv::start ── posix_spawn ─────────> envs/python/pronghorn_worker.py
//                     <── "spec {…}" + memfd ─ makes the K envs, the memory
//   step: actions → memory, "step" ──────────> vector step (SAME_STEP)
//         obs, rewards, flags ← memory <─ "ok" ─ writes them into the memory
//
// One worker per PythonEnv, so one process's GIL never serialises another's
// envs. The worker loads no LibTorch and none of our code; it dies with this
// process (PR_SET_PDEATHSIG, and a watch on its parent). Observations cross
// once: from the memory into the caller's buffer (a ring slot).
//
// Errors: the worker's own line. At start (an unknown id, a module that does
// not import, an unsupported space, an interpreter older than 3.10):
// UsageError naming the env and the interpreter. In reset or step (the env
// raised): Error with the exception's last line; the traceback is on
// stderr. A worker that dies: Error naming how.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/config.h"
#include "envs/env.h"

namespace pronghorn::envs {

// The spec of the Python env `config` names, tried as the job's start
// check: its worker (a child process) makes one env, resets and steps it
// once. Throws as PythonEnv does.
EnvSpec probe_python_env(const EnvConfig& config);

class PythonEnv final : public BatchEnv {
 public:
  // How long the worker may take to import the env's packages and make K envs.
  static constexpr std::chrono::seconds kStartTimeout{120};
  // How long a step polls for the worker's reply before it sleeps on it.
  static constexpr std::chrono::microseconds kPollFor{2000};

  // Whether `name` is a Python env's ("gymnasium:…", "envpool:…", "python:…").
  static bool names_python_env(const std::string& name);

  // Starts the worker and takes its spec. Throws as above.
  static std::unique_ptr<PythonEnv> start(const EnvConfig& config, uint64_t seed);
  ~PythonEnv() override;  // closes the socket; the worker exits (SIGKILL after 2 s)

  std::string label() const override;
  pid_t worker_pid() const { return pid_; }

 protected:
  void reset_unchecked(void* obs) override;
  void step_unchecked(const void* actions, const StepOutput& out) override;

 private:
  struct Layout {
    size_t actions = 0, obs = 0, rewards = 0, terminated = 0, truncated = 0, final_obs = 0;
    size_t size = 0;
  };
  PythonEnv(EnvSpec spec, int64_t num_envs, std::string python, pid_t pid, int socket,
            int memory_fd, Layout layout);
  // Sends `command`, waits for "ok"; Error with the worker's line otherwise.
  void call(const char* command);
  [[noreturn]] void worker_failed(const std::string& during);

  const std::string python_;
  pid_t pid_;
  int socket_;
  Layout layout_;
  uint8_t* memory_ = nullptr;  // layout_.size bytes, shared with the worker
};

}  // namespace pronghorn::envs
