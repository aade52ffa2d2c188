#include "learner/evaluator.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "fleet/actor_command.h"

namespace pronghorn::learner {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kBestRecordName = "best.json";
constexpr std::string_view kBestKey = "\"eval_return_mean\": ";

constexpr const char* kSnapshotName = "evaluating.ckpt";
constexpr const char* kResultName = "evaluating.result";
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr auto kStopGrace = std::chrono::seconds(3);

// An evaluation's files in the checkpoint folder, removed however it ends
// (best.ckpt is the snapshot renamed: nothing left to remove then).
struct Scratch {
  std::string snapshot, result;
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove(snapshot, ignored);
    std::filesystem::remove(result, ignored);
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
      program_(std::move(program)),
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
  EvalReport report;
  report.env_steps = snapshot_.counters.env_steps;
  const Scratch files{checkpoints_ + "/" + kSnapshotName, checkpoints_ + "/" + kResultName};
  const std::string& snapshot = files.snapshot;
  try {
    std::error_code ec;
    std::filesystem::create_directories(checkpoints_, ec);
    PRONGHORN_CHECK(!ec, "checkpoint folder ", checkpoints_, ": ", ec.message());
    write_checkpoint_file(snapshot, snapshot_);
  } catch (const Error& e) {  // a full disk: training goes on without this evaluation
    report.skipped = e.what();
  }
  if (report.skipped.empty()) {
    report.result = run_process(snapshot, files.result);
    if (!report.result.cancelled && report.result.mean > best_) record_best(snapshot, report);
  }
  std::lock_guard lock(mutex_);
  report_ = std::move(report);
}

actor::Evaluation Evaluator::run_process(const std::string& snapshot, const std::string& result) {
  std::error_code ignored;
  std::filesystem::remove(result, ignored);  // a crashed run's: never read as this one's
  std::vector<std::string> args = {"pronghorn"};
  const std::vector<std::string> rest = fleet::evaluation_process_args(
      {.config_path = config_path_, .checkpoint = snapshot, .result = result, .parent = getpid()});
  args.insert(args.end(), rest.begin(), rest.end());
  fleet::ActorOutput output;
  const pid_t pid = fleet::start_child(program_, args, output, "the evaluation process");
  int status = 0;
  std::optional<Clock::time_point> kill_at;  // set once cancelled: SIGKILL then
  for (;;) {
    output.drain();
    const pid_t reaped = waitpid(pid, &status, WNOHANG);
    if (reaped == pid) break;
    PRONGHORN_CHECK(reaped == 0, "the evaluation process (pid ", pid,
                    "): waitpid: ", std::strerror(errno));
    if (cancel_.load() && !kill_at) {
      kill(pid, SIGTERM);
      kill_at = Clock::now() + kStopGrace;
    }
    if (kill_at && Clock::now() >= *kill_at) kill(pid, SIGKILL);
    std::this_thread::sleep_for(kPoll);
  }
  output.finish();
  if (cancel_.load()) {  // whatever it managed, the learner no longer waits for it
    actor::Evaluation cancelled;
    cancelled.cancelled = true;
    return cancelled;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const fleet::ChildDeath death = fleet::death_of(status, output.last_line());
    throw Error(fmt::format(
        "the evaluation process (pid {}) {}; {}, {} envs at once (run.eval_episodes = {}), "
        "evaluating the policy at {} env steps",
        pid, death.how, env_label(config_.env), actor::evaluation_envs(config_.run.eval_episodes),
        config_.run.eval_episodes, snapshot_.counters.env_steps));
  }
  return actor::parse_evaluation(read_file(result));
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
