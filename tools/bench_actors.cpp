// `pronghorn bench actors -c CONFIG`: env steps per second through a job's
// whole actor side: the config's actor processes (env, policy forward and
// sampling, the unroll written into the ring) with an untrained policy (the
// model's initial weights, never updated: no learner trains), and the
// learner's prefetcher taking batches from the ring (the copy into a batch,
// then the slots released). What a learner that never waits would get.
// Printed with the share of the actors' time in the env, the policy and
// waiting for a free slot, from the unrolls' own stamps.
#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "actor/job_check.h"
#include "buffer/segment_names.h"
#include "core/error.h"
#include "core/files.h"
#include "learner/actor_fleet.h"
#include "learner/policy_training.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ActorBenchArgs {
  ConfigArgs config;
  double seconds = 10;
  double warmup = 3;
};

// A run directory of its own (the actors read config.toml there), removed
// with it.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pronghorn-bench-XXXXXX");
    PRONGHORN_CHECK(mkdtemp(pattern.data()) != nullptr,
                    "bench actors: mkdtemp: ", std::strerror(errno));
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

void bench_actors(const ActorBenchArgs& args) {
  Config config = args.config.load();
  config.run.name = fmt::format("bench-actors-{}", getpid());
  ScratchDir dir;
  write_file_atomically(dir.path + "/config.toml", to_toml(config));
  learner::TrainOptions o;
  o.config = config;
  o.env = actor::check_job_config(config);
  o.run_dir = dir.path;
  learner::PolicyTraining policy(o.config, o.env);
  learner::ActorFleet fleet(o, buffer::own_segment_name(buffer::kRingSegment, config.run.name));
  policy.create_slab(buffer::own_segment_name(buffer::kSlabSegment, config.run.name));
  const uint64_t version = policy.publish();
  fleet.start(policy.slab_name(), policy.slab(), version, 0);

  const auto start = Clock::now();
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(args.warmup));
  const auto measure_to = measure_from + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(args.seconds));
  uint64_t steps = 0;
  double env_s = 0, policy_s = 0, wait_s = 0;
  Clock::time_point first{}, last{};
  while (Clock::now() < measure_to) {
    fleet.poll();  // throws when the actors keep failing
    const std::optional<learner::PreparedBatch> prepared =
        fleet.next_batch(std::chrono::milliseconds(100));
    if (!prepared) continue;
    const auto now = Clock::now();
    if (now < measure_from) continue;
    if (first == Clock::time_point{}) {
      first = now;  // batches counted from the next one on
      continue;
    }
    last = now;
    steps += fleet.batch_env_steps();
    env_s += prepared->batch.actor_env_s;
    policy_s += prepared->batch.actor_policy_s;
    wait_s += prepared->batch.actor_wait_s;
  }
  fleet.end();
  const double elapsed = std::chrono::duration<double>(last - first).count();
  if (steps == 0 || elapsed <= 0) {
    throw Error(fmt::format("bench actors: fewer than two batches in {:g} s after the warm-up",
                            args.seconds));
  }
  const double actor_s = env_s + policy_s + wait_s;
  std::cout << fmt::format(
      "bench actors: {} K={} actors={} workers={} T={}: {:.0f} env steps/s ({} steps in {:.2f} "
      "s); actor time: env {:.0f}%, policy {:.0f}%, waiting for a slot {:.0f}%\n",
      config.env.plugin.empty() ? config.env.name : config.env.plugin, config.env.num_envs,
      fleet.initial_actors(), config.env.workers, config.actor.unroll_length, steps / elapsed,
      steps, elapsed, 100 * env_s / actor_s, 100 * policy_s / actor_s, 100 * wait_s / actor_s);
}

}  // namespace

CLI::App* add_bench_actors(CLI::App& bench, std::function<void()>& run) {
  auto args = std::make_shared<ActorBenchArgs>();
  CLI::App* command = bench.add_subcommand(
      "actors",
      "Env steps per second through a job's actors with an untrained policy, no learning");
  add_config_options(command, args->config);
  command->add_option("--seconds", args->seconds, "measuring time, after the warm-up")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  command->add_option("--warmup", args->warmup, "seconds before measuring")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  run = [args] { bench_actors(*args); };
  return command;
}

}  // namespace pronghorn::cli
