#include "learner/evaluation_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "fleet/actor_command.h"
#include "fleet/child_process.h"
#include "fleet/local_socket.h"

namespace pronghorn::learner {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(20);
constexpr std::string_view kEnd = "end\n";

// A name no other learner's evaluation process takes: this process's pid
// and a count.
std::string socket_name() {
  static std::atomic<uint64_t> count{0};
  return fmt::format("pronghorn-evaluation-{}-{}", getpid(), count++);
}

}  // namespace

EvaluationProcess::EvaluationProcess(std::string program, std::string config_path, std::string env)
    : program_(std::move(program)), config_path_(std::move(config_path)), env_(std::move(env)) {}

EvaluationProcess::~EvaluationProcess() { stop(); }

void EvaluationProcess::start(uint64_t env_steps, const std::atomic<bool>& cancel) {
  const std::string name = socket_name();
  listener_ = fleet::listen_local(name);
  std::vector<std::string> args = {"pronghorn"};
  const std::vector<std::string> rest = fleet::evaluation_process_args(
      {.config_path = config_path_, .socket = name, .parent = getpid()});
  args.insert(args.end(), rest.begin(), rest.end());
  output_ = fleet::ActorOutput();
  pid_ = fleet::start_child(program_, args, output_, "the evaluation process");
  const auto deadline = Clock::now() + kStartTimeout;
  while (socket_ < 0) {
    socket_ = fleet::accept_local(listener_, pid_, kPoll);
    output_.drain();
    int status = 0;
    if (socket_ < 0 && reaped(status)) died(status, env_steps);
    if (cancel.load()) return;
    PRONGHORN_CHECK(Clock::now() < deadline, "the evaluation process (pid ", pid_,
                    ") did not connect within ", kStartTimeout.count(), " s; ", env_);
  }
  close(listener_);
  listener_ = -1;
}

actor::Evaluation EvaluationProcess::evaluate(const std::string& snapshot, uint64_t env_steps,
                                              const std::atomic<bool>& cancel) {
  actor::Evaluation cancelled;
  cancelled.cancelled = true;
  if (pid_ < 0) start(env_steps, cancel);
  if (cancel.load()) return cancelled;
  try {
    fleet::send_text(socket_, snapshot + "\n");
  } catch (const Error&) {  // gone: how it ended says more
  }
  std::string inbox;
  for (;;) {
    const bool open = fleet::receive_text(socket_, inbox, kPoll);
    output_.drain();
    if (const size_t end = inbox.find(kEnd);
        end != std::string::npos && (end == 0 || inbox[end - 1] == '\n')) {
      return actor::parse_evaluation(inbox.substr(0, end));
    }
    int status = 0;
    if (!open) {  // it closed its end: it is ending, or has ended
      const auto deadline = Clock::now() + kStopGrace;
      while (!reaped(status) && Clock::now() < deadline) std::this_thread::sleep_for(kPoll);
      if (pid_ > 0) status = stop();  // alive without its socket: of no use
      died(status, env_steps);
    }
    if (reaped(status)) died(status, env_steps);
    if (cancel.load()) {
      stop();
      return cancelled;
    }
  }
}

bool EvaluationProcess::reaped(int& status) {
  if (pid_ <= 0) return true;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  PRONGHORN_CHECK(r >= 0, "the evaluation process (pid ", pid_,
                  "): waitpid: ", std::strerror(errno));
  if (r == 0) return false;
  output_.finish();
  last_pid_ = std::exchange(pid_, -1);
  return true;
}

void EvaluationProcess::died(int status, uint64_t env_steps) {
  const fleet::ChildDeath death = fleet::death_of(status, output_.last_line());
  throw Error(
      fmt::format("the evaluation process (pid {}) {}; {}, evaluating the policy at {} env "
                  "steps",
                  last_pid_, death.how, env_, env_steps));
}

int EvaluationProcess::stop() {
  if (socket_ >= 0) close(socket_);
  if (listener_ >= 0) close(listener_);
  socket_ = listener_ = -1;
  int status = 0;
  if (pid_ <= 0) return status;
  kill(pid_, SIGTERM);
  const auto kill_at = Clock::now() + kStopGrace;
  while (!reaped(status)) {
    if (Clock::now() >= kill_at) kill(pid_, SIGKILL);
    output_.drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

}  // namespace pronghorn::learner
