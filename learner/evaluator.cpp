#include "learner/evaluator.h"

#include <fmt/format.h>

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

constexpr const char* kSnapshotName = "evaluating.ckpt";

// The snapshot an evaluation reads, removed however it ends (best.ckpt is
// the snapshot renamed: nothing left to remove then).
struct Scratch {
  std::string snapshot;
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove(snapshot, ignored);
  }
};

// How errors name the env an evaluation steps: `env plugin PATH (env
// "NAME")`, as the plugin's own errors do, or `env NAME`.
std::string env_label(const EnvConfig& env) {
  return env.plugin.empty() ? fmt::format("env {}", env.name)
                            : fmt::format("env plugin {} (env \"{}\")", env.plugin, env.name);
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

Evaluator::Evaluator(const Config& config, std::string config_path, std::string checkpoints,
                     std::string program)
    : config_(config),
      config_path_(std::move(config_path)),
      checkpoints_(std::move(checkpoints)),
      process_(
          std::move(program), config_path_,
          fmt::format("{}, {} envs at once (run.eval_episodes = {})", env_label(config.env),
                      actor::evaluation_envs(config.run.eval_episodes), config.run.eval_episodes)),
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
    {
      std::lock_guard lock(mutex_);
      state_ = State::kDone;
    }
    finished_.notify_all();
  }
}

void Evaluator::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  finished_.wait_for(lock, timeout, [this] { return state_.load() != State::kRunning; });
}

void Evaluator::evaluate() {
  EvalReport report;
  report.env_steps = snapshot_.counters.env_steps;
  const Scratch file{checkpoints_ + "/" + kSnapshotName};
  const std::string& snapshot = file.snapshot;
  try {
    std::error_code ec;
    std::filesystem::create_directories(checkpoints_, ec);
    PRONGHORN_CHECK(!ec, "checkpoint folder ", checkpoints_, ": ", ec.message());
    write_checkpoint_file(snapshot, snapshot_);
  } catch (const Error& e) {  // a full disk: training goes on without this evaluation
    report.skipped = e.what();
  }
  if (report.skipped.empty()) {
    report.result = process_.evaluate(snapshot, report.env_steps, cancel_);
    if (!report.result.cancelled && report.result.mean > best_) record_best(snapshot, report);
  }
  std::lock_guard lock(mutex_);
  report_ = std::move(report);
}

void Evaluator::record_best(const std::string& snapshot, EvalReport& report) {
  try {
    // The snapshot is a whole checkpoint: renamed, it is best.ckpt at once.
    std::error_code ec;
    std::filesystem::rename(snapshot, checkpoints_ + "/" + kBestCheckpointName, ec);
    PRONGHORN_CHECK(!ec, "best checkpoint ", checkpoints_, "/", kBestCheckpointName, ": ",
                    ec.message());
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

}  // namespace pronghorn::learner
