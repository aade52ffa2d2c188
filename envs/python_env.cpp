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
  one.splits = 1;
  PythonWorker worker(one, 1, {0}, 0, /*with_packages=*/true);
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

std::unique_ptr<PythonEnv> PythonEnv::start(const EnvConfig& config, uint64_t seed) {
  const int64_t k = config.num_envs, splits = config.splits;
  // core/config_checks.cpp refuses this first; here for the callers that
  // change env.num_envs after it.
  if (splits < 1 || k % splits != 0) {
    throw UsageError(fmt::format("env {}: env.splits = {} does not divide env.num_envs = {}",
                                 config.name, splits, k));
  }
  const int64_t rows = k / splits;
  const int64_t w = std::clamp<int64_t>(config.workers, 1, rows);
  // Spawned all first, so they import and make their envs at once.
  std::vector<Placed> workers;
  int64_t offset = 0;
  for (int64_t i = 0; i < w; ++i) {
    const int64_t share = rows / w + (i < rows % w ? 1 : 0);
    std::vector<int64_t> first_envs;
    for (int64_t s = 0; s < splits; ++s) first_envs.push_back(s * rows + offset);
    workers.push_back(
        {std::make_unique<PythonWorker>(config, share * splits, first_envs, seed), offset, share});
    offset += share;
  }
  const auto deadline = PythonWorker::Clock::now() + kStartTimeout;
  EnvSpec spec = workers.front().worker->await_spec(deadline);
  for (size_t i = 1; i < workers.size(); ++i) {
    const EnvSpec other = workers[i].worker->await_spec(deadline);
    PRONGHORN_CHECK(same_spec(spec, other), workers[i].worker->label(), ": worker ", i,
                    " made envs of another spec than worker 0: ", other.describe(), " against ",
                    spec.describe());
  }
  return std::unique_ptr<PythonEnv>(new PythonEnv(std::move(spec), k, splits, std::move(workers)));
}

PythonEnv::PythonEnv(EnvSpec spec, int64_t num_envs, int64_t splits, std::vector<Placed> workers)
    : BatchEnv(std::move(spec), num_envs), workers_(std::move(workers)) {
  for (int64_t s = 0; s < splits; ++s) {
    step_commands_.push_back(splits == 1 ? std::string("step") : fmt::format("step {}", s));
    step_labels_.push_back(splits == 1 ? std::string("step")
                                       : fmt::format("step (split {} of {})", s, splits));
  }
}

PythonEnv::~PythonEnv() = default;

std::optional<BatchEnv::Frame> PythonEnv::frame() {
  Frame f;
  workers_.front().worker->render(PythonWorker::Clock::now() + kStartTimeout, f.height, f.width,
                                  f.rgb);
  return f;
}

std::string PythonEnv::label() const { return workers_.front().worker->label(); }

std::vector<pid_t> PythonEnv::worker_pids() const {
  std::vector<pid_t> pids;
  for (const Placed& w : workers_) pids.push_back(w.worker->pid());
  return pids;
}

void PythonEnv::call_all(const char* command) {
  for (Placed& w : workers_) w.worker->send(command);
  for (Placed& w : workers_) w.worker->await_reply(command);
}

void PythonEnv::reset_unchecked(void* obs) {
  call_all("reset");
  const size_t row = spec().obs_bytes();
  for (int64_t s = 0; s < splits(); ++s) {
    for (Placed& w : workers_) {
      const auto first = static_cast<size_t>(s * split_rows() + w.offset);
      std::memcpy(static_cast<uint8_t*>(obs) + first * row,
                  w.worker->memory(w.worker->layout().obs) + s * w.share * row, row * w.share);
    }
  }
}

void PythonEnv::step_unchecked(const void* actions, const StepOutput& out) {
  const size_t action_row = spec().action_bytes();
  for (int64_t s = 0; s < splits(); ++s) {
    begin_step_unchecked(s, static_cast<const uint8_t*>(actions) + s * split_rows() * action_row);
  }
  for (int64_t s = 0; s < splits(); ++s) {
    finish_step_unchecked(s, rows_from(out, spec(), s * split_rows()));
  }
}

void PythonEnv::begin_step_unchecked(int64_t split, const void* actions) {
  const size_t action_row = spec().action_bytes();
  for (Placed& w : workers_) {
    std::memcpy(w.worker->memory(w.worker->layout().actions) + split * w.share * action_row,
                static_cast<const uint8_t*>(actions) + w.offset * action_row, action_row * w.share);
    w.worker->send(step_commands_[split].c_str());
  }
}

void PythonEnv::finish_step_unchecked(int64_t split, const StepOutput& out) {
  const size_t row = spec().obs_bytes(), info_row = spec().episode_info.size();
  for (Placed& w : workers_) {
    PythonWorker& worker = *w.worker;
    const PythonWorker::Layout& l = worker.layout();
    worker.await_reply(step_labels_[split].c_str());
    const auto from = static_cast<size_t>(split * w.share);  // in the worker's memory
    const auto n = static_cast<size_t>(w.share);
    const StepOutput to = rows_from(out, spec(), w.offset);
    std::memcpy(to.obs, worker.memory(l.obs) + from * row, row * n);
    std::memcpy(to.rewards, worker.memory(l.rewards) + from * sizeof(float), sizeof(float) * n);
    const uint8_t* terminated = worker.memory(l.terminated) + from;
    const uint8_t* truncated = worker.memory(l.truncated) + from;
    std::memcpy(to.terminated, terminated, n);
    std::memcpy(to.truncated, truncated, n);
    for (size_t i = 0; i < n; ++i) {  // only ended rows: the contract of envs/env.h
      if (!terminated[i] && !truncated[i]) continue;
      if (to.final_obs != nullptr) {
        std::memcpy(static_cast<uint8_t*>(to.final_obs) + i * row,
                    worker.memory(l.final_obs) + (from + i) * row, row);
      }
      if (to.episode_info != nullptr) {
        std::memcpy(to.episode_info + i * info_row,
                    worker.memory(l.episode_info) + (from + i) * info_row * sizeof(float),
                    info_row * sizeof(float));
      }
    }
  }
}

}  // namespace pronghorn::envs
