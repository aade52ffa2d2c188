// One env worker of a Python env (envs/python_env.h): a process of the
// user's interpreter (env.python) running envs/python/pronghorn_worker.py for
// its share of an actor's envs, the socket it answers on and the shared
// memory it made. This class owns all three: its destructor closes the
// socket (the worker reads the end of its commands and exits), unmaps the
// memory and reaps the worker, SIGKILL after kExitWait.
//
//   worker: "spec {…}" (a TOML inline table) + the memfd (SCM_RIGHTS), or
//           "error <line>" and exit 2
//   actor:  "reset" | "step" | "step S" (split S alone); worker: "ok" |
//           "error <line>"
//   actor:  "render"; worker: "frame H W" + a memfd of RGB bytes, or "error <line>"
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/env_spec.h"

namespace pronghorn::envs {

class PythonWorker {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kExitWait{2};
  // How long a call polls for the worker's reply before it sleeps on it: on
  // a virtual machine a process woken after sleeping through an env step can
  // take 100 µs or more to run again, as long as a step of a few envs
  // (BENCHMARKS.md, 2026-11-27). The worker polls for commands as long.
  static constexpr std::chrono::microseconds kPollFor{2000};
  // The longest line a worker may send (a spec, a reply).
  static constexpr size_t kMaxLine = size_t{1} << 20;
  // The widest and tallest frame a worker may draw, in pixels.
  static constexpr int64_t kMaxFrameSide = 16384;

  // Where each field lies in the shared memory, in bytes.
  struct Layout {
    size_t actions = 0, obs = 0, rewards = 0, terminated = 0, truncated = 0, final_obs = 0;
    size_t episode_info = 0;  // float32 [K, spec.episode_info.size()]
    size_t size = 0;
  };

  // Starts the worker for `num_envs` envs in first_envs.size() splits of
  // equal size, row j of split s being env first_envs[s] + j of an actor
  // whose env seed is `seed` (the seeds the worker documents);
  // `with_packages`: its spec names the env's packages (EnvSpec::packages).
  // Throws UsageError when env.python cannot run.
  PythonWorker(const EnvConfig& config, int64_t num_envs, const std::vector<int64_t>& first_envs,
               uint64_t seed, bool with_packages = false);
  ~PythonWorker();
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  // The worker's spec, once it made its envs (by `deadline`), and its
  // memory mapped. Throws UsageError with the worker's own line for what
  // cannot be hosted, Error for a worker that breaks the protocol.
  EnvSpec await_spec(Clock::time_point deadline);

  // A command; then its reply, "ok" or an Error naming the env and the
  // worker's line (the exception's last line), or how the worker died. In an
  // actor no deadline (Clock::time_point::max()): a step that never returns
  // is the actors' watchdog's to end (actor.stall_timeout_s), as with
  // plugins; the start check gives one.
  // Several commands may be sent before their replies are awaited, in order.
  void send(const char* command);
  void await_reply(const char* command, Clock::time_point deadline = Clock::time_point::max());

  // The frame of this worker's first env ("render"), RGB [height, width,
  // 3], by `deadline`; Error with the worker's line when it draws none.
  void render(Clock::time_point deadline, int64_t& height, int64_t& width,
              std::vector<uint8_t>& rgb);

  uint8_t* memory(size_t offset) { return memory_ + offset; }
  const Layout& layout() const { return layout_; }
  int64_t num_envs() const { return num_envs_; }
  pid_t pid() const { return pid_; }
  // "env NAME (env.python = \"PY\")": how errors name the env.
  const std::string& label() const { return label_; }

 private:
  [[noreturn]] void refuse(const std::string& why);
  [[noreturn]] void failed(const std::string& during);

  const std::string env_name_, python_, label_;
  const int64_t num_envs_;
  pid_t pid_ = -1;
  int socket_ = -1;
  Clock::time_point started_{};  // of the last command sent
  std::string received_;         // replies received and not yet awaited
  Layout layout_;
  uint8_t* memory_ = nullptr;  // layout_.size bytes, shared with the worker
};

}  // namespace pronghorn::envs
