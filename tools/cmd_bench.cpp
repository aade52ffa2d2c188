// `pronghorn bench ...`: throughput figures, printed, never asserted.
//   bench env      env steps per second of one batched env per thread
//   bench kernels  fused V-trace and loss against stock ops (bench_kernels.cpp)
//   bench ring     actor→learner GB/s through the ring against memcpy (bench_ring.cpp)
//   bench collective  the learners' gradient all-reduce against raw c10d Gloo
//                     (bench_collective.cpp)
//   bench remote   unrolls/s through the actor gateway against the ring and raw
//                  gRPC (bench_remote.cpp)
//   bench policy   an actor's policy step, fused MLP path against LibTorch
//                  (bench_policy.cpp)
//   bench actors   env steps/s through a config's actor processes into the
//                  ring, untrained policy, no learning (bench_actors.cpp)
// Each thread steps its own K envs with actions drawn before timing starts.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "envs/env.h"
#include "envs/rng.h"
#include "envs/testing/buffers.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct EnvBenchArgs {
  EnvConfig env;
  std::string config;  // a config whose [env] to step, under the options given
  int threads = 1;
  double seconds = 2.0;
};

// Random valid actions for K envs, kRows different rows to cycle through.
constexpr int kRows = 64;
std::vector<uint8_t> random_actions(const envs::EnvSpec& spec, int64_t k, uint64_t seed) {
  std::vector<uint8_t> actions(spec.action_bytes() * k * kRows);
  envs::Rng rng(seed, 0);
  if (spec.action_kind == envs::ActionKind::kDiscrete) {
    auto* a = reinterpret_cast<int32_t*>(actions.data());
    for (int64_t i = 0; i < k * kRows; ++i)
      a[i] = rng.below(static_cast<uint32_t>(spec.action_size));
  } else {
    auto* a = reinterpret_cast<float*>(actions.data());
    for (int64_t i = 0; i < k * kRows * spec.action_size; ++i) {
      int64_t d = i % spec.action_size;
      a[i] = static_cast<float>(rng.uniform(spec.action_low[d], spec.action_high[d]));
    }
  }
  return actions;
}

// Steps one env until `stop`; returns env steps taken after `go`.
int64_t run_env(const EnvConfig& config, uint64_t seed, std::latch& ready,
                const std::atomic<bool>& go, const std::atomic<bool>& stop) {
  auto env = envs::make_env(config, seed);
  envs::Buffers buf(env->spec(), env->num_envs());
  std::vector<uint8_t> actions = random_actions(env->spec(), env->num_envs(), seed);
  const size_t row_bytes = env->spec().action_bytes() * env->num_envs();
  env->reset(buf.obs.data());
  ready.count_down();
  int64_t steps = 0, row = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    env->step(actions.data() + row_bytes * (row++ % kRows), buf.out());
    if (go.load(std::memory_order_relaxed)) steps += env->num_envs();
  }
  return steps;
}

// The env to step: args.env, or the [env] of args.config with the options
// given on the command line (`command`'s) over it.
EnvConfig env_to_bench(const EnvBenchArgs& args, const CLI::App& command) {
  if (args.config.empty()) return args.env;
  std::vector<std::string> overrides;
  if (command.count("--python") > 0) overrides.push_back("env.python=" + args.env.python);
  EnvConfig env = load_config(args.config, overrides).env;
  if (command.count("--env") > 0) env.name = args.env.name;
  if (command.count("--plugin") > 0) env.plugin = args.env.plugin;
  if (command.count("--workers") > 0) env.workers = args.env.workers;
  if (command.count("--num-envs") > 0) env.num_envs = args.env.num_envs;
  return env;
}

void bench_env(EnvBenchArgs args, const CLI::App& command) {
  args.env = env_to_bench(args, command);
  std::latch ready(args.threads);
  std::atomic<bool> go{false}, stop{false};
  std::vector<int64_t> steps(args.threads);
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (int t = 0; t < args.threads; ++t) {
    threads.emplace_back([&, t] {
      try {
        steps[t] = run_env(args.env, static_cast<uint64_t>(t) + 1, ready, go, stop);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        failure = std::current_exception();
        ready.count_down();
      }
    });
  }
  ready.wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // warm-up
  go = true;
  auto start = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(args.seconds));
  stop = true;
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
  int64_t total = 0;
  for (int64_t s : steps) total += s;
  double per_second = total / elapsed;
  std::cout << fmt::format(
      "bench env: {} K={} threads={}{}: {:.4f} M env steps/s ({:.2f} ns/step/thread, {:.1f} s)\n",
      args.env.plugin.empty() ? args.env.name : args.env.plugin, args.env.num_envs, args.threads,
      args.env.workers > 1 ? fmt::format(" workers={}", args.env.workers) : "", per_second / 1e6,
      1e9 * args.threads / per_second, elapsed);
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure throughput and print figures");
  bench->require_subcommand(1);
  auto args = std::make_shared<EnvBenchArgs>();
  args->env.num_envs = 4096;
  CLI::App* env = bench->add_subcommand("env", "Env steps per second, one batched env per thread");
  env->add_option("--env", args->env.name, "built-in env name, or a Python env's")
      ->capture_default_str();
  env->add_option("--plugin", args->env.plugin, "env plugin (.so) instead of a built-in env");
  env->add_option("-c,--config", args->config,
                  "step the [env] of this config (its name, options, interpreter, K); the "
                  "options given here override it")
      ->check(CLI::ExistingFile);
  env->add_option("--python", args->env.python,
                  "interpreter of a Python env (--env gymnasium:<id>)")
      ->capture_default_str();
  env->add_option("--workers", args->env.workers,
                  "a Python env's worker processes per thread, each stepping its share")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  env->add_option("--num-envs", args->env.num_envs, "K: envs per batch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  env->add_option("--threads", args->threads, "threads, each stepping its own K envs")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  env->add_option("--seconds", args->seconds, "measuring time")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 3600.0));
  std::function<void()> run_kernels, run_ring, run_collective, run_remote, run_policy, run_actors,
      run_learner;
  CLI::App* kernels = add_bench_kernels(*bench, run_kernels);
  CLI::App* ring = add_bench_ring(*bench, run_ring);
  CLI::App* collective = add_bench_collective(*bench, run_collective);
  CLI::App* remote = add_bench_remote(*bench, run_remote);
  CLI::App* policy = add_bench_policy(*bench, run_policy);
  CLI::App* actors = add_bench_actors(*bench, run_actors);
  CLI::App* learner = add_bench_learner(*bench, run_learner);
  return {bench,
          [args, env, kernels, run_kernels, ring, run_ring, collective, run_collective, remote,
           run_remote, policy, run_policy, actors, run_actors, learner, run_learner] {
            if (env->parsed()) bench_env(*args, *env);
            if (kernels->parsed()) run_kernels();
            if (ring->parsed()) run_ring();
            if (collective->parsed()) run_collective();
            if (remote->parsed()) run_remote();
            if (policy->parsed()) run_policy();
            if (actors->parsed()) run_actors();
            if (learner->parsed()) run_learner();
          }};
}

}  // namespace pronghorn::cli
