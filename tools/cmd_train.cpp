// `pronghorn train`: one whole job on this machine — a learner that spawns and
// supervises the actors (docs/architecture.md §2) — writing its run directory:
// config.toml, metrics.jsonl, train.log. Ctrl-C stops it cleanly.
// `pronghorn actor-process` is the actor process the learner starts (not for users).
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "actor/actor.h"
#include "actor/job_check.h"
#include "control/control_plane.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/run_dir.h"
#include "core/token.h"
#include "fleet/actor_capacity.h"
#include "fleet/actor_command.h"
#include "fleet/priority.h"
#include "learner/checkpoint.h"
#include "learner/learner.h"
#include "model/tensor_runtime.h"
#include "tools/cli.h"
#include "tools/cluster.h"
#include "tools/exit_record.h"
#include "tools/gateway.h"
#include "tools/stop_signal.h"

namespace pronghorn::cli {
namespace {

std::string default_run_name() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%d-%H%M%S", std::localtime(&now));
  return text;
}

struct TrainArgs {
  ConfigArgs config;
  std::string run_dir;
  std::string resume;
  std::string name;  // this node's name among several learners
  bool print_config = false;
};

// The config.toml of the run being resumed: a file this program wrote, so a
// FIFO or a device there is refused rather than read (a FIFO would block).
// A rank > 0 whose node does not share rank 0's filesystem has only its own,
// in ranks/<r>/.
std::string resumed_config(const std::string& run_dir) {
  std::string path = run_dir + "/config.toml";
  if (!std::filesystem::exists(path)) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(run_dir + "/ranks", ec)) {
      if (std::filesystem::exists(e.path() / "config.toml"))
        found.push_back(e.path() / "config.toml");
    }
    if (found.size() == 1) path = found[0];
  }
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw UsageError(path + ": not a regular file; --resume reads the run's own config.toml");
  }
  return path;
}

// Several learners on one machine (or one address) must not collide: the
// control plane and /metrics ports left at their defaults become 0 (a free
// port each; every rank writes its own server.address).
void free_default_ports(ServerConfig& server) {
  const ServerConfig defaults;
  if (server.address == defaults.address) {
    server.address = server.address.substr(0, server.address.rfind(':')) + ":0";
  }
  // A metrics port on another address was chosen for a scraper (a pod's
  // 0.0.0.0:7454, named in its scrape annotation): kept.
  if (server.metrics_port == defaults.metrics_port &&
      server.metrics_address == defaults.metrics_address) {
    server.metrics_port = 0;
  }
}

// The job's token: server.token_file, else PRONGHORN_TOKEN, else the run
// directory's (rank 0 makes it; a rank > 0 reads it on a shared filesystem).
std::string job_token(const Config& config, const std::string& run_dir, int rank) {
  if (!config.server.token_file.empty()) return read_token_file(config.server.token_file);
  if (const char* token = std::getenv("PRONGHORN_TOKEN"); token != nullptr && *token != 0) {
    return token;
  }
  if (rank == 0) return read_or_create_token_file(run_dir + "/token");
  const std::string path = run_dir + "/token";
  if (!std::filesystem::exists(path)) {
    throw UsageError(
        "rank > 0 needs the job's token: set server.token_file or PRONGHORN_TOKEN, "
        "or share rank 0's run directory (" +
        path + " does not exist here)");
  }
  return read_run_token_file(path);
}

// The config a run directory keeps. Where a rank stands (distributed.rank,
// .rendezvous) is told afresh at every start, --resume included: a new
// attempt may place ranks differently, and rank 0 listens on a new port.
Config saved_config(Config config) {
  config.distributed.rank.reset();
  config.distributed.rendezvous.clear();
  return config;
}

// How a finished run is evaluated: `pronghorn eval` takes its directory
// (best.ckpt, else the newest checkpoint). None when it kept no checkpoint.
std::string eval_hint(const std::string& dir) {
  const bool best = std::filesystem::exists(dir + "/checkpoints/best.ckpt");
  if (!best && learner::checkpoint_candidates(dir + "/checkpoints").empty()) return "";
  return "evaluate it: pronghorn eval " + dir;
}

struct JobEnd {
  std::string line;     // the result: stdout, train.log and exit_status
  std::string run_dir;  // "" when nothing ran (--print-config)
};

// What this rank runs: the config resolved (the run's own on --resume, then
// --set), where it stands among several learners, its run directory, and
// the env probed once.
struct JobPlan {
  Config config;
  LearnerConfig::Device device_setting;  // as the user wrote it: config.toml keeps it
  distributed::Placement place;
  bool generated_name = false;  // run.name made from the clock
  std::string job_dir;          // rank 0's run directory
  EnvSpec env;
  bool cluster() const { return place.world_size > 1; }
  // The config with learner.device as written ("auto" stays "auto": the run
  // may resume on another machine).
  Config as_written() const {
    Config c = config;
    c.learner.device = device_setting;
    return c;
  }
};

JobPlan plan_job(const TrainArgs& args, ExitRecord& exit_record) {
  JobPlan plan;
  Config& config = plan.config;
  // --resume DIR: the run's own resolved config, then any --set on top.
  config = args.resume.empty() ? args.config.load()
                               : load_config(resumed_config(args.resume), args.config.overrides);
  plan.place = distributed::resolve_placement(config.distributed, args.name);
  // A rank > 0 resumes from its own config where it has one (a shared
  // filesystem also holds rank 0's, which the lines above read).
  if (!args.resume.empty() && plan.place.rank > 0) {
    const std::string own = fmt::format("{}/ranks/{}/config.toml", args.resume, plan.place.rank);
    if (std::filesystem::is_regular_file(own)) {
      config = load_config(own, args.config.overrides);
      plan.place = distributed::resolve_placement(config.distributed, args.name);
    }
  }
  // A resumed run is this job's: how this attempt ends goes there even if it
  // ends before its directory is claimed (a rank lost at the rendezvous).
  const std::string resumed_own =
      plan.place.rank == 0 ? args.resume : fmt::format("{}/ranks/{}", args.resume, plan.place.rank);
  if (!args.resume.empty() && std::filesystem::is_directory(resumed_own)) {
    exit_record.claim(resumed_own);
  }
  if (plan.cluster() && config.run.name.empty()) {
    throw UsageError(
        "several learners need run.name, the same on every rank (e.g. --set "
        "run.name=$SLURM_JOB_ID)");
  }
  plan.generated_name = config.run.name.empty();
  if (plan.generated_name) config.run.name = default_run_name();
  if (plan.cluster()) free_default_ports(config.server);
  // What `pronghorn config` refuses, refused before a run directory exists;
  // the env probed once here serves the learner.
  plan.env = actor::check_job_config(config);
  fleet::check_actor_count(config.actor);
  // "auto": the env's own target (a plugin's if it declares one, else none),
  // recorded in config.toml.
  config.run.target_return = config.run.target_return.value_or(plan.env.target_return);
  // "auto" decided once, here, for the whole job.
  plan.device_setting = config.learner.device;
  config.learner.device = resolve_learner_device(config.learner.device);
  plan.job_dir = !args.resume.empty()    ? args.resume
                 : !args.run_dir.empty() ? args.run_dir
                                         : config.run.dir + "/" + config.run.name;
  return plan;
}

// Claims this rank's run directory (rank 0 owns <run>/ and makes it before
// the others can meet it; a rank r > 0 makes <run>/ranks/<r>/ once rank 0 is
// there), writes config.toml and opens train.log there; its path.
std::string open_run_directory(JobPlan& plan, const TrainArgs& args,
                               std::optional<RunDirectory>& run, ExitRecord& exit_record) {
  using Mode = RunDirectory::Mode;
  Config& config = plan.config;
  const int rank = plan.place.rank;
  if (rank > 0) {
    const std::string own = fmt::format("{}/ranks/{}", plan.job_dir, rank);
    if (args.resume.empty() && std::filesystem::exists(own + "/config.toml")) {
      throw UsageError(fmt::format(
          "{}: rank {} of an earlier run of {} is there; continue the whole group with --resume "
          "{} on every rank, or choose another run.name",
          own, rank, config.run.name, plan.job_dir));
    }
    run.emplace(own,
                !args.resume.empty() && std::filesystem::exists(own) ? Mode::kResume : Mode::kNew);
  } else if (!args.resume.empty()) {
    run.emplace(args.resume, Mode::kResume);
  } else {
    // A name made from the clock gives way to a -2, -3… when taken (two jobs
    // in one second); a name or directory the user chose is refused when taken.
    const bool suffixed = plan.generated_name && args.run_dir.empty();
    run.emplace(plan.job_dir, suffixed ? Mode::kNewOrSuffixed : Mode::kNew);
    if (suffixed) config.run.name = run->name();
  }
  const std::string dir = run->path();
  exit_record.claim(dir);
  write_file_atomically(dir + "/config.toml", to_toml(saved_config(plan.as_written())));
  add_log_file(dir + "/train.log");
  return dir;
}

// A rank that failed before the job ran, or while it ran, with others: its
// line reaches them (they end with it), unless it was lost itself.
void tell_the_others(ClusterMember& member, const std::exception& e) {
  if (!member.rendezvous || dynamic_cast<const TransientError*>(&e) != nullptr) return;
  const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
  member.rendezvous->report_failure(usage ? kExitUsage : kExitFailure, e.what());
  member.collective.reset();  // the others' next call fails; they find the report
  member.rendezvous->wait_failure_read();
}

// The rank was lost because another failed on its own: end with that rank's
// reason and code. No rendezvous yet when a rank never came (join_cluster
// threw): then the PeerLost being handled, rethrown.
[[noreturn]] void rethrow_as_the_failed_rank(const ClusterMember& member) {
  if (const auto failed = member.rendezvous ? member.rendezvous->peer_failure() : std::nullopt) {
    const std::string line = fmt::format("rank {} failed: {}", failed->rank, failed->line);
    if (failed->exit_code == kExitUsage) throw UsageError(line);
    throw Error(line);
  }
  throw;
}

// The line a finished job ends with.
std::string result_line(const learner::TrainResult& r, const Config& config,
                        const std::string& dir) {
  if (r.reached_target) {
    return fmt::format(
        "solved: mean return {:.1f} ≥ {} on evaluation ({} greedy episodes; training {:.1f} over "
        "the last 100) after {:.1f} s and {} env steps; run directory {}",
        r.eval_return_mean, *config.run.target_return, r.eval_episodes, r.return_mean, r.seconds,
        r.env_steps, dir);
  }
  return fmt::format(
      "stopped after {:.1f} s and {} env steps, mean return {:.1f}; run directory {}", r.seconds,
      r.env_steps, r.return_mean, dir);
}

// Runs the job; returns its last line.
JobEnd train_job(const TrainArgs& args, ExitRecord& exit_record) {
  JobPlan plan = plan_job(args, exit_record);
  const Config& config = plan.config;
  if (args.print_config) {
    std::cout << to_toml(plan.as_written());
    return {};
  }
  const int rank = plan.place.rank;
  std::optional<RunDirectory> run;
  bool started = false;
  learner::TrainResult r;
  std::string dir, token;
  ClusterMember member;  // outlives the try: a rank that fails reports through it
  try {
    if (rank == 0) {
      dir = open_run_directory(plan, args, run, exit_record);
      // A learner alone without nodes leaves its token to the control plane, as before.
      if (plan.cluster() || !config.remote.address.empty()) token = job_token(config, dir, 0);
    }
    if (plan.cluster()) {
      spdlog::info("{}", distributed::describe(plan.place));
      member = join_cluster(
          config, plan.env, plan.place,
          [&] { return rank == 0 ? token : token = job_token(config, plan.job_dir, rank); },
          [&](const std::string& address) {
            write_file_atomically(dir + "/rendezvous.address", address + "\n");
          });
    }
    if (rank > 0) dir = open_run_directory(plan, args, run, exit_record);
    const std::atomic<bool>& stop = install_stop_handlers();
    learner::ControlBoard board;
    learner::Learner learner(
        {config, plan.env, dir, !args.resume.empty(), member.collective.get(), plan.place.node_name,
         member.nodes, member.hosts, gateway_factory(config, plan.env, dir, token)},
        board, stop);
    control::ControlPlane control(config.server, dir, board, token);
    started = true;
    r = learner.run();
  } catch (const distributed::PeerLost&) {
    // Nothing of a job that never ran is kept but how it ended (exit_status,
    // written by the caller): a scheduler's retry loop reads the 75 there.
    if (!started && run) run->empty_if_new();
    rethrow_as_the_failed_rank(member);
  } catch (const std::exception& e) {
    if (!started && run) run->remove_if_new();
    tell_the_others(member, e);
    throw;
  }
  return {result_line(r, config, dir), dir};
}

void run_train(const TrainArgs& args) {
  ExitRecord exit_record;
  try {
    const JobEnd end = train_job(args, exit_record);
    if (end.line.empty()) return;  // --print-config
    exit_record.record(0, end.line);
    log_to_files_only(end.line);  // train.log keeps the result; stdout shows it
    std::cout << end.line << "\n";
    if (const std::string hint = eval_hint(end.run_dir); !hint.empty()) std::cout << hint << "\n";
  } catch (const std::exception& e) {
    exit_record.record(exit_code_of(e), e.what());
    log_to_files_only(e.what(), /*error=*/true);  // train.log keeps how the job ended
    throw;
  }
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* command = app.add_subcommand(
      "train", "Train on this machine: a learner and its actor processes (Ctrl-C stops)");
  add_config_options(command, args->config);
  command->add_option("--run-dir", args->run_dir, "run directory (default: <run.dir>/<run.name>)");
  command
      ->add_option("--resume", args->resume,
                   "continue the run in this directory from its newest valid checkpoint")
      ->check(CLI::ExistingDirectory);
  command->add_option("--name", args->name,
                      "this node's name among several learners (default: SLURMD_NODENAME, else "
                      "the hostname)");
  command->add_flag("--print-config", args->print_config, "print the resolved config and exit");
  return {command, [args] { run_train(*args); }, /*starts_actors=*/true};
}

Command add_actor_process_command(CLI::App& app) {
  struct ActorArgs {
    std::string config, ring, slab;
    uint32_t id = 0;
    uint32_t rank = 0;
    int learner_pid = 0;
    uint32_t lockstep_unrolls = 0;
    int nice = 0;
  };
  auto args = std::make_shared<ActorArgs>();
  CLI::App* command =
      app.add_subcommand(fleet::kActorProcessCommand, "An actor process, started by the learner");
  command->group("");  // internal: not listed in --help
  // The command line fleet/actor_command.h builds.
  command->add_option(fleet::kConfigFlag, args->config, "the run's config.toml")->required();
  command->add_option(fleet::kRingFlag, args->ring, "shm name of the ring")->required();
  command->add_option(fleet::kSlabFlag, args->slab, "shm name of the weight slab")->required();
  command->add_option(fleet::kActorIdFlag, args->id, "this actor's index")->required();
  command->add_option(fleet::kParentFlag, args->learner_pid, "exit when this process is gone");
  command->add_option(fleet::kSeedRankFlag, args->rank,
                      "its learner's rank among several (seeds envs apart)");
  command->add_option(fleet::kLockstepFlag, args->lockstep_unrolls,
                      "run.deterministic: the unrolls each batch takes from this actor");
  command->add_option(fleet::kNiceFlag, args->nice, "this process's nice value (actor.nice)");
  return {command, [args] {
            init_logging("actor" + std::to_string(args->id), "info");
            fleet::lower_priority(args->nice);
            actor::run_actor({load_config(args->config, {}), args->ring, args->slab, args->id,
                              args->rank, args->learner_pid, args->lockstep_unrolls},
                             install_stop_handlers());
          }};
}

}  // namespace pronghorn::cli
