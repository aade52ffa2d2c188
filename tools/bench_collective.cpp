// `pronghorn bench collective`: time per call of the learners' one all-reduce
// per step (GlooCollective::all_reduce_sum of the flat gradients plus
// DataParallel's 4 tail floats) against, in the same run, a raw c10d
// ProcessGroupGloo allreduce of the same bytes, for the CartPole MLP's and the
// IMPALA CNN's parameter counts at 2 and 3 ranks.
//
// The ranks are processes: this one hosts a TCPStore on 127.0.0.1 and starts
// itself W times as `bench collective --rank r ...` (posix_spawn, not fork:
// LibTorch's threads do not survive a fork). Rank 0 publishes its medians in
// the store. Every wait has a deadline (--timeout-s): the ranks' store and
// Gloo calls, this process's wait for the figures and for the ranks to exit;
// past it, or when a rank fails, every rank is killed and the bench fails.
// Both bind 127.0.0.1 over Gloo's TCP transport: ours reads and writes in
// the calling thread (GlooCollective's all-reduce), raw through c10d's one
// worker thread, so the ratio is what those threads' wake-ups cost.
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "core/error.h"
#include "distributed/gloo_collective.h"
#include "envs/env.h"
#include "model/policy.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int64_t kTail = 4;  // DataParallel's samples and votes after the gradients

struct CollectiveArgs {
  int iterations = 200;
  int warmup = 20;
  std::vector<int> worlds = {2, 3};
  double timeout_s = 120;
  // A rank of the bench (set when this process was started as one).
  int rank = -1, world = 0, port = 0;
  std::vector<int64_t> counts;
};

struct Model {
  std::string what;
  int64_t parameters;
};

// The parameter counts of the models the learners train: the CartPole MLP and
// the IMPALA CNN on 4 stacked 84×84 frames with Atari Pong's 6 actions.
std::vector<Model> models() {
  const EnvSpec cartpole = envs::make_env(EnvConfig{}, 0)->spec();
  EnvSpec pong;
  pong.name = "pong-like";
  pong.obs_dtype = Dtype::kUInt8;
  pong.obs_shape = {4, 84, 84};
  pong.action_size = 6;
  const ModelConfig config = Config{}.model;
  return {{"CartPole MLP", PolicyNet(model_spec_for(cartpole, config))->parameter_count()},
          {"IMPALA CNN 4x84x84", PolicyNet(model_spec_for(pong, config))->parameter_count()}};
}

milliseconds timeout_of(const CollectiveArgs& a) {
  return milliseconds(static_cast<int64_t>(a.timeout_s * 1000));
}

std::string result_key(int64_t count) { return fmt::format("result/{}", count); }

// The q-quantile of `v` (0.5: the median).
double quantile(std::vector<double> v, double q) {
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// One rank: both groups over the parent's store, then for each count the
// warm-up and the timed calls, ours and raw alternating so that both see the
// same load; rank 0 publishes the median and 10th percentile of each (on a
// loaded machine a call either runs at once or waits a scheduler slice for a
// core: the 10th percentile is the first, the median whichever dominates).
void run_rank(const CollectiveArgs& a) {
  const milliseconds timeout = timeout_of(a);
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(a.port);
  store_options.isServer = false;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", store_options);
  distributed::GlooCollective ours(
      c10::make_intrusive<c10d::PrefixStore>("ours", store),
      {.rank = a.rank, .world_size = a.world, .bind_address = "127.0.0.1", .timeout = timeout});
  auto raw_options = c10d::ProcessGroupGloo::Options::create(timeout);
  raw_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  raw_options->threads = 1;
  c10d::ProcessGroupGloo raw(c10::make_intrusive<c10d::PrefixStore>("raw", store), a.rank, a.world,
                             raw_options);
  for (const int64_t count : a.counts) {
    // Zeros: sums stay finite whatever the number of calls.
    std::vector<float> mine(count + kTail, 0.0f), theirs(count + kTail, 0.0f);
    std::vector<at::Tensor> raw_tensors{torch::from_blob(
        theirs.data(), {static_cast<int64_t>(theirs.size())}, torch::dtype(torch::kFloat))};
    auto call_ours = [&] { ours.all_reduce_sum(std::span<float>(mine)); };
    auto call_raw = [&] { raw.allreduce(raw_tensors)->wait(timeout); };
    for (int i = 0; i < a.warmup; ++i) call_ours(), call_raw();
    std::vector<double> ours_us, raw_us;
    auto time_us = [](const std::function<void()>& f) {
      const auto start = Clock::now();
      f();
      return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    };
    for (int i = 0; i < a.iterations; ++i) {
      if (i % 2 == 0) {
        ours_us.push_back(time_us(call_ours));
        raw_us.push_back(time_us(call_raw));
      } else {
        raw_us.push_back(time_us(call_raw));
        ours_us.push_back(time_us(call_ours));
      }
    }
    if (a.rank == 0) {
      const std::string figures =
          fmt::format("{} {} {} {}", quantile(ours_us, 0.5), quantile(raw_us, 0.5),
                      quantile(ours_us, 0.1), quantile(raw_us, 0.1));
      store->set(result_key(count), std::vector<uint8_t>(figures.begin(), figures.end()));
    }
  }
  ours.barrier();  // nobody leaves while another still reduces
}

// The rank processes of one measurement: killed and reaped on every way out
// unless they all exited by themselves.
class Ranks {
 public:
  ~Ranks() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }

  void start(std::vector<std::string> args) {
    args.insert(args.begin(), "pronghorn");
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
    PRONGHORN_CHECK(err == 0, "bench collective: cannot start a rank process: ", strerror(err));
    pids_.push_back(pid);
  }

  // Throws naming the first rank that ended other than with exit code 0.
  void check_running() {
    for (size_t r = 0; r < pids_.size(); ++r) {
      int status = 0;
      if (pids_[r] > 0 && waitpid(pids_[r], &status, WNOHANG) == pids_[r]) {
        pids_[r] = -pids_[r];  // reaped
        PRONGHORN_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "bench collective: rank ", r,
                        " failed (", WIFEXITED(status) ? "exit code " : "signal ",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), ")");
      }
    }
  }

  // Waits for every rank to exit with 0 by `deadline`.
  void wait_all(Clock::time_point deadline) {
    while (true) {
      check_running();
      if (std::all_of(pids_.begin(), pids_.end(), [](pid_t p) { return p < 0; })) break;
      PRONGHORN_CHECK(Clock::now() < deadline,
                      "bench collective: the ranks did not exit within --timeout-s");
      std::this_thread::sleep_for(milliseconds(10));
    }
    pids_.clear();
  }

 private:
  std::vector<pid_t> pids_;  // negative once reaped
};

struct Figures {
  double ours_median = 0, raw_median = 0, ours_p10 = 0, raw_p10 = 0;  // microseconds a call
};

// The figures of each count at `world` ranks.
std::vector<Figures> measure(const CollectiveArgs& a, int world,
                             const std::vector<int64_t>& counts) {
  const auto deadline = Clock::now() + timeout_of(a);
  c10d::TCPStoreOptions store_options;
  store_options.port = 0;
  store_options.isServer = true;
  store_options.waitWorkers = false;
  store_options.timeout = timeout_of(a);
  c10d::TCPStore store("127.0.0.1", store_options);
  std::string count_list;
  for (int64_t c : counts) count_list += (count_list.empty() ? "" : ",") + std::to_string(c);
  Ranks ranks;
  for (int r = 0; r < world; ++r) {
    ranks.start({"bench", "collective", "--rank", std::to_string(r), "--world",
                 std::to_string(world), "--port", std::to_string(store.getPort()), "--counts",
                 count_list, "--iterations", std::to_string(a.iterations), "--warmup",
                 std::to_string(a.warmup), "--timeout-s", fmt::format("{}", a.timeout_s)});
  }
  std::vector<std::string> keys;
  for (int64_t c : counts) keys.push_back(result_key(c));
  while (!store.check(keys)) {
    ranks.check_running();
    PRONGHORN_CHECK(Clock::now() < deadline, "bench collective: no figures from ", world,
                    " ranks within --timeout-s ", a.timeout_s, " s");
    std::this_thread::sleep_for(milliseconds(20));
  }
  std::vector<Figures> figures;
  for (const std::string& key : keys) {
    const std::vector<uint8_t> value = store.get(key);
    std::istringstream in(std::string(value.begin(), value.end()));
    Figures& f = figures.emplace_back();
    in >> f.ours_median >> f.raw_median >> f.ours_p10 >> f.raw_p10;
  }
  ranks.wait_all(deadline);
  return figures;
}

void bench_collective(const CollectiveArgs& a) {
  if (a.rank >= 0) return run_rank(a);
  const std::vector<Model> all = models();
  std::vector<int64_t> counts;
  for (const Model& m : all) counts.push_back(m.parameters + kTail);
  std::cout << fmt::format(
      "bench collective: one all-reduce of the gradients + {} floats per learner step, ranks as "
      "processes on 127.0.0.1 (Gloo: ours in the calling thread, raw through c10d's thread), {} "
      "calls after {} warm-up, {} cores\n",
      kTail, a.iterations, a.warmup, std::thread::hardware_concurrency());
  std::cout << fmt::format("{:<48} {:>23} {:>23} {:>13}\n", "", "ours (us)", "raw c10d (us)",
                           "ours / raw");
  std::cout << fmt::format("{:<20} {:>10} {:>10} {:>5} {:>11} {:>11} {:>11} {:>11} {:>6} {:>6}\n",
                           "model", "parameters", "bytes", "ranks", "median", "p10", "median",
                           "p10", "median", "p10");
  for (int world : a.worlds) {
    const auto figures = measure(a, world, counts);
    for (size_t i = 0; i < all.size(); ++i) {
      const Figures& f = figures[i];
      std::cout << fmt::format(
          "{:<20} {:>10} {:>10} {:>5} {:>11.1f} {:>11.1f} {:>11.1f} {:>11.1f} {:>6.2f} {:>6.2f}\n",
          all[i].what, all[i].parameters, counts[i] * 4, world, f.ours_median, f.ours_p10,
          f.raw_median, f.raw_p10, f.ours_median / f.raw_median, f.ours_p10 / f.raw_p10);
    }
  }
}

}  // namespace

CLI::App* add_bench_collective(CLI::App& bench, std::function<void()>& run) {
  auto args = std::make_shared<CollectiveArgs>();
  CLI::App* command = bench.add_subcommand(
      "collective",
      "Learners' gradient all-reduce per step against a raw c10d Gloo all-reduce, 2 and 3 ranks");
  command->add_option("--iterations", args->iterations, "timed calls per figure")
      ->capture_default_str()
      ->check(CLI::Range(1, 1'000'000));
  command->add_option("--warmup", args->warmup, "untimed calls first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1'000'000));
  command->add_option("--ranks", args->worlds, "world sizes to measure")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  command->add_option("--timeout-s", args->timeout_s, "deadline of each world size's measurement")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  // Set by the bench itself when it starts its rank processes.
  command->add_option("--rank", args->rank)->group("");
  command->add_option("--world", args->world)->group("");
  command->add_option("--port", args->port)->group("");
  command->add_option("--counts", args->counts)->delimiter(',')->group("");
  run = [args] { bench_collective(*args); };
  return command;
}

}  // namespace pronghorn::cli
