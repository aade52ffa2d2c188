#include "envs/python_env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace pronghorn::envs {
namespace {

// Whether two workers' specs agree: the same env made from the same config.
bool same_spec(const EnvSpec& a, const EnvSpec& b) {
  return a.obs_dtype == b.obs_dtype && a.obs_shape == b.obs_shape &&
         a.action_kind == b.action_kind && a.action_size == b.action_size &&
         a.action_low == b.action_low && a.action_high == b.action_high &&
         a.episode_info == b.episode_info;
}

}  // namespace

EnvSpec probe_python_env(const EnvConfig& config, std::chrono::milliseconds deadline) {
  EnvConfig one = config;
  one.num_envs = 1;
  one.workers = 1;
  PythonWorker worker(one, 1, 0, 0, /*with_packages=*/true);
  const EnvSpec spec = worker.await_spec(PythonWorker::Clock::now() + PythonEnv::kStartTimeout);
  std::vector<float> actions(static_cast<size_t>(spec.action_size), 0.0f);
  if (spec.action_kind == ActionKind::kContinuous) {
    for (size_t d = 0; d < actions.size(); ++d) {
      actions[d] = 0.5f * (spec.action_low[d] + spec.action_high[d]);  // in bounds
    }
  }
  for (const char* command : {"reset", "step"}) {
    std::memcpy(worker.memory(worker.layout().actions), actions.data(), spec.action_bytes());
    worker.send(command);
    worker.await_reply(command, PythonWorker::Clock::now() + deadline);
  }
  return spec;
}

bool PythonEnv::names_python_env(const std::string& name) {
  return name.starts_with("gymnasium:") || name.starts_with("envpool:") ||
         name.starts_with("python:");
}

std::unique_ptr<PythonEnv> PythonEnv::start(const EnvConfig& config, uint64_t seed) {
  const int64_t k = config.num_envs;
  const int64_t w = std::clamp<int64_t>(config.workers, 1, k);
  // Spawned all first, so they import and make their envs at once.
  std::vector<std::unique_ptr<PythonWorker>> workers;
  int64_t first = 0;
  for (int64_t i = 0; i < w; ++i) {
    const int64_t share = k / w + (i < k % w ? 1 : 0);
    workers.push_back(std::make_unique<PythonWorker>(config, share, first, seed));
    first += share;
  }
  const auto deadline = PythonWorker::Clock::now() + kStartTimeout;
  EnvSpec spec = workers.front()->await_spec(deadline);
  for (size_t i = 1; i < workers.size(); ++i) {
    const EnvSpec other = workers[i]->await_spec(deadline);
    PRONGHORN_CHECK(same_spec(spec, other), workers[i]->label(), ": worker ", i,
                    " made envs of another spec than worker 0: ", other.describe(), " against ",
                    spec.describe());
  }
  return std::unique_ptr<PythonEnv>(new PythonEnv(std::move(spec), k, std::move(workers)));
}

PythonEnv::PythonEnv(EnvSpec spec, int64_t num_envs,
                     std::vector<std::unique_ptr<PythonWorker>> workers)
    : BatchEnv(std::move(spec), num_envs), workers_(std::move(workers)) {}

PythonEnv::~PythonEnv() = default;

std::optional<BatchEnv::Frame> PythonEnv::frame() {
  Frame f;
  workers_.front()->render(PythonWorker::Clock::now() + kStartTimeout, f.height, f.width, f.rgb);
  return f;
}

std::string PythonEnv::label() const { return workers_.front()->label(); }

std::vector<pid_t> PythonEnv::worker_pids() const {
  std::vector<pid_t> pids;
  for (const auto& w : workers_) pids.push_back(w->pid());
  return pids;
}

void PythonEnv::call_all(const char* command) {
  for (auto& w : workers_) w->send(command);
  for (auto& w : workers_) w->await_reply(command);
}

void PythonEnv::reset_unchecked(void* obs) {
  call_all("reset");
  const size_t row = spec().obs_bytes();
  auto* out = static_cast<uint8_t*>(obs);
  for (auto& w : workers_) {
    const size_t n = static_cast<size_t>(w->num_envs());
    std::memcpy(out, w->memory(w->layout().obs), row * n);
    out += row * n;
  }
}

void PythonEnv::step_unchecked(const void* actions, const StepOutput& out) {
  const size_t row = spec().obs_bytes(), action_row = spec().action_bytes();
  const size_t info_row = spec().episode_info.size();
  size_t first = 0;
  for (auto& w : workers_) {
    const size_t n = static_cast<size_t>(w->num_envs());
    std::memcpy(w->memory(w->layout().actions),
                static_cast<const uint8_t*>(actions) + first * action_row, action_row * n);
    w->send("step");
    first += n;
  }
  first = 0;
  for (auto& w : workers_) {
    const size_t n = static_cast<size_t>(w->num_envs());
    const PythonWorker::Layout& l = w->layout();
    w->await_reply("step");
    std::memcpy(static_cast<uint8_t*>(out.obs) + first * row, w->memory(l.obs), row * n);
    std::memcpy(out.rewards + first, w->memory(l.rewards), sizeof(float) * n);
    std::memcpy(out.terminated + first, w->memory(l.terminated), n);
    std::memcpy(out.truncated + first, w->memory(l.truncated), n);
    const uint8_t* terminated = w->memory(l.terminated);
    const uint8_t* truncated = w->memory(l.truncated);
    for (size_t i = 0; i < n; ++i) {  // only ended rows: the contract of envs/env.h
      if (!terminated[i] && !truncated[i]) continue;
      if (out.final_obs != nullptr) {
        std::memcpy(static_cast<uint8_t*>(out.final_obs) + (first + i) * row,
                    w->memory(l.final_obs) + i * row, row);
      }
      if (out.episode_info != nullptr) {
        std::memcpy(out.episode_info + (first + i) * info_row,
                    w->memory(l.episode_info) + i * info_row * sizeof(float),
                    info_row * sizeof(float));
      }
    }
    first += n;
  }
}

}  // namespace pronghorn::envs
