// `pronghorn bench actors -c CONFIG`: env steps per second through a job's
// whole actor side: the config's actor processes (env, policy forward and
// sampling, the unroll written into the ring) with an untrained policy (the
// model's initial weights, never updated: no learner trains), and the
// learner's prefetcher taking batches from the ring (the copy into a batch,
// then the slots released). What a learner that never waits would get.
// Printed with the share of the actors' time in the env, the policy and
// waiting for a free slot, from the unrolls' own stamps.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>

#include "actor/job_check.h"
#include "buffer/segment_names.h"
#include "core/error.h"
#include "core/files.h"
#include "envs/python_env.h"
#include "learner/actor_fleet.h"
#include "learner/policy_training.h"
#include "remote/node_session.h"
#include "tools/cli.h"

namespace pronghorn::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kDirPrefix = "pronghorn-bench-";

struct ActorBenchArgs {
  ConfigArgs config;
  double seconds = 10;
  double warmup = 3;
};

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Takes batches until `until`: their env steps and the actors' time in them.
struct Taken {
  uint64_t steps = 0, batches = 0;
  double env_s = 0, policy_s = 0, wait_s = 0;
};
Taken take_until(learner::ActorFleet& fleet, Clock::time_point until) {
  Taken t;
  while (Clock::now() < until) {
    fleet.poll();  // throws when the actors keep failing
    const std::optional<learner::PreparedBatch> prepared =
        fleet.next_batch(std::chrono::milliseconds(100));
    if (!prepared) continue;
    ++t.batches;
    t.steps += fleet.batch_env_steps();
    t.env_s += prepared->batch.actor_env_s;
    t.policy_s += prepared->batch.actor_policy_s;
    t.wait_s += prepared->batch.actor_wait_s;
  }
  return t;
}

void bench_actors(const ActorBenchArgs& args) {
  Config config = args.config.load();
  if (config.actor.count && *config.actor.count == 0) {
    throw UsageError("bench actors: actor.count = 0: nothing to measure; give it actors");
  }
  config.run.name = fmt::format("bench-actors-{}", getpid());
  // The run directory (the actors read config.toml there): this process's,
  // gone with it; one a killed bench left behind goes now.
  remote::remove_dead_node_dirs(remote::temp_base(), kDirPrefix);
  const remote::NodeDir dir(remote::temp_base(), kDirPrefix);
  write_file_atomically(dir.path() + "/config.toml", to_toml(config));
  learner::TrainOptions o;
  o.config = config;
  o.env = actor::check_job_config(config);
  o.run_dir = dir.path();
  learner::PolicyTraining policy(o.config, o.env);
  learner::ActorFleet fleet(o, buffer::own_segment_name(buffer::kRingSegment, config.run.name));
  policy.create_slab(buffer::own_segment_name(buffer::kSlabSegment, config.run.name));
  const uint64_t version = policy.publish();
  fleet.start(policy.slab_name(), policy.slab(), version, 0);

  // The clock starts at the first batch: starting the actors (LibTorch, a
  // Python env's packages) is not what is measured.
  const auto started = Clock::now();
  while (take_until(fleet, Clock::now() + std::chrono::milliseconds(100)).batches == 0) {
    if (Clock::now() - started > envs::PythonEnv::kStartTimeout) {
      throw Error(fmt::format("bench actors: no batch within {} s of starting the actors",
                              envs::PythonEnv::kStartTimeout.count()));
    }
  }
  take_until(fleet, Clock::now() + seconds(args.warmup));
  const auto from = Clock::now();
  const Taken t = take_until(fleet, from + seconds(args.seconds));
  const double elapsed = std::chrono::duration<double>(Clock::now() - from).count();
  fleet.end();
  const double actor_s = std::max(t.env_s + t.policy_s + t.wait_s, 1e-9);
  const bool python = is_python_env(config.env);
  std::cout << fmt::format(
      "bench actors: {} K={} actors={}{} T={}: {:.0f} env steps/s ({} steps in {:.2f} s); actor "
      "time: env {:.0f}%, policy {:.0f}%, waiting for a slot {:.0f}%\n",
      config.env.plugin.empty() ? config.env.name : config.env.plugin, config.env.num_envs,
      fleet.initial_actors(),
      python ? fmt::format(" workers={} splits={}", config.env.workers, config.env.splits) : "",
      config.actor.unroll_length, t.steps / elapsed, t.steps, elapsed, 100 * t.env_s / actor_s,
      100 * t.policy_s / actor_s, 100 * t.wait_s / actor_s);
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
