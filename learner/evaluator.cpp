#include "learner/evaluator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/files.h"

namespace pronghorn::learner {
namespace {

constexpr const char* kBestRecordName = "best.json";
constexpr std::string_view kBestKey = "\"eval_return_mean\": ";

// A model of `spec` whose initial weights do not move the default CPU
// generator: the learner's draws (and a resumed run's) stay what they were.
PolicyNet unseeded_model(const EnvSpec& spec, const ModelConfig& config) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  const at::Tensor state = generator.get_state();
  PolicyNet model(model_spec_for(spec, config));
  generator.set_state(state);
  return model;
}

}  // namespace

double recorded_best_return(const std::string& folder) {
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(folder + "/" + kBestCheckpointName, ec)) return kNone;
  try {
    const std::string text = read_file(folder + "/" + kBestRecordName);
    const size_t at = text.find(kBestKey);
    if (at == std::string::npos) return kNone;
    char* end = nullptr;
    const double v = std::strtod(text.c_str() + at + kBestKey.size(), &end);
    return end != text.c_str() + at + kBestKey.size() && std::isfinite(v) ? v : kNone;
  } catch (const Error&) {
    return kNone;  // no record: the next evaluation writes both
  }
}

Evaluator::Evaluator(const Config& config, const EnvSpec& spec, std::string checkpoints)
    : config_(config),
      spec_(spec),
      model_(unseeded_model(spec, config.model)),
      checkpoints_(std::move(checkpoints)),
      best_(recorded_best_return(checkpoints_)),
      thread_([this] { loop(); }) {}

Evaluator::~Evaluator() {
  cancel_ = true;
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

bool Evaluator::start(Checkpoint snapshot) {
  if (state_.load() != State::kIdle) return false;
  {
    std::lock_guard lock(mutex_);
    snapshot_ = std::move(snapshot);
    state_ = State::kRunning;
  }
  wake_.notify_one();
  return true;
}

std::optional<EvalReport> Evaluator::take() {
  if (state_.load() != State::kDone) return std::nullopt;
  std::lock_guard lock(mutex_);
  state_ = State::kIdle;
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  return std::move(report_);
}

void Evaluator::loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return quit_ || state_.load() == State::kRunning; });
      if (quit_) return;
    }
    try {
      evaluate();
    } catch (...) {  // handed to the learner's thread, which ends the job with it
      std::lock_guard lock(mutex_);
      failure_ = std::current_exception();
    }
    std::lock_guard lock(mutex_);
    state_ = State::kDone;
  }
}

void Evaluator::evaluate() {
  PRONGHORN_CHECK(static_cast<int64_t>(snapshot_.parameters.size()) == model_->parameter_count(),
                  "evaluation: ", snapshot_.parameters.size(), " parameters for a model of ",
                  model_->parameter_count());
  model_->read_flat(snapshot_.parameters.data());
  EvalReport report;
  report.env_steps = snapshot_.counters.env_steps;
  report.result = evaluate_policy(model_, config_.env, config_.run.eval_episodes, true,
                                  evaluation_seed(static_cast<uint64_t>(config_.run.seed)),
                                  &cancel_, config_.model.fast_path);
  if (!report.result.cancelled && report.result.mean > best_) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(checkpoints_, ec);
      PRONGHORN_CHECK(!ec, "checkpoint folder ", checkpoints_, ": ", ec.message());
      write_checkpoint_file(checkpoints_ + "/" + kBestCheckpointName, snapshot_);
      // After the checkpoint: a crash between the two leaves an older, lower
      // record, so at worst the next evaluation replaces a better best.ckpt.
      write_file_atomically(
          checkpoints_ + "/" + kBestRecordName,
          fmt::format("{{{}{}, \"eval_std\": {}, \"eval_episodes\": {}, \"env_steps\": {}}}\n",
                      kBestKey, report.result.mean, report.result.std, report.result.returns.size(),
                      report.env_steps));
      best_ = report.result.mean;
      report.new_best = true;
    } catch (const Error& e) {  // a full disk: the evaluation still counts
      report.best_error = e.what();
    }
  }
  std::lock_guard lock(mutex_);
  report_ = std::move(report);
}

}  // namespace pronghorn::learner
