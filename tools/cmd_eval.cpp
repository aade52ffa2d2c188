// `pronghorn eval RUN_DIR|CHECKPOINT`: runs a checkpoint's policy (with its
// run's config.toml) for N episodes and prints return statistics, as text or
// one JSON object (--json). A run directory stands for its best.ckpt (the
// best evaluation of the run), else its newest valid checkpoint. Greedy
// actions by default (the most likely action, the Gaussian's mean: SB3's
// evaluate_policy default), sampled with --sample. The episodes and the seed
// default to the run's own evaluation's, whose numbers this reproduces
// (learner/evaluation.h: the same function). --dump-forward writes the
// network's outputs for given observations instead (tools/forward_dump.h);
// --video records the episodes (tools/eval_video.h), --episodes-out writes
// each one's return and length.
#include <fmt/format.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "actor/evaluation.h"
#include "buffer/process.h"
#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "envs/env.h"
#include "fleet/actor_command.h"
#include "fleet/local_socket.h"
#include "learner/checkpoint.h"
#include "learner/checkpoint_model.h"
#include "model/policy.h"
#include "model/tensor_runtime.h"
#include "proto/json_string.h"
#include "tools/cli.h"
#include "tools/eval_video.h"
#include "tools/forward_dump.h"
#include "tools/run_policy.h"
#include "tools/stop_signal.h"

namespace pronghorn::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string path;        // a run directory or a .ckpt file
  std::string checkpoint;  // --checkpoint, the earlier spelling of a .ckpt path
  std::optional<int64_t> episodes;
  bool greedy = false;  // accepted for older scripts: greedy is the default
  bool sample = false;
  bool json = false;
  std::optional<uint64_t> seed;
  std::vector<std::string> dump_forward;  // OBS OUT
  std::string fast_path;                  // "" = the run's model.fast_path
  std::string video;                      // --video FILE
  std::string episodes_out;               // --episodes-out FILE.jsonl
};

// Each episode's return and length, one JSON object per line.
void write_episodes(const std::string& path, const actor::Evaluation& e) {
  std::string text;
  for (size_t i = 0; i < e.returns.size(); ++i) {
    text += fmt::format("{{\"episode\": {}, \"return\": {}, \"length\": {}}}\n", i, e.returns[i],
                        i < e.lengths.size() ? e.lengths[i] : 0);
  }
  write_file_atomically(path, text);
}

// Sets `cancel` once `stop` is set or process `parent` (0: none) is gone,
// looking every 100 ms for as long as it lives.
class CancelWatch {
 public:
  CancelWatch(const std::atomic<bool>& stop, pid_t parent, std::atomic<bool>& cancel)
      : thread_([this, &stop, parent, &cancel] {
          while (!done_.load()) {
            if (stop.load() || (parent != 0 && !buffer::process_alive(parent, 0))) cancel = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~CancelWatch() {
    done_ = true;
    thread_.join();
  }
  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: started once done_ exists
};

// The learner's evaluation process (learner/evaluation_process.h): for each
// snapshot path the learner sends, greedy returns over run.eval_episodes
// episodes from the run's evaluation seed, as `pronghorn eval` runs them,
// sent back with a line "end". Ends when the learner closes the socket or is
// gone, or on SIGTERM.
void run_evaluation_process(const fleet::EvaluationTarget& target) {
  init_logging("evaluation", "info");
  const std::atomic<bool>& stop = install_stop_handlers();
  const Config config = load_config(target.config_path, {});
  set_compute_threads(static_cast<int>(config.actor.threads));
  const int socket = fleet::connect_local(target.socket);
  const uint64_t seed = actor::evaluation_seed(static_cast<uint64_t>(config.run.seed));
  std::atomic<bool> cancel{false};
  const CancelWatch watch(stop, target.parent, cancel);
  PolicyNet model = policy_for(config).model;
  std::string inbox;
  while (!cancel.load()) {
    if (!fleet::receive_text(socket, inbox, std::chrono::milliseconds(100))) break;
    const size_t newline = inbox.find('\n');
    if (newline == std::string::npos) continue;
    const std::string snapshot = inbox.substr(0, newline);
    inbox.erase(0, newline + 1);
    load_parameters(model, learner::load_checkpoint(snapshot), snapshot, target.config_path);
    torch::manual_seed(seed);
    const actor::Evaluation e =
        actor::evaluate_policy(model, config.env, config.run.eval_episodes, /*greedy=*/true, seed,
                               &cancel, config.model.fast_path);
    try {
      fleet::send_text(socket, actor::format_evaluation(e) + "end\n");
    } catch (const Error&) {
      break;  // the learner closed its end as the job ended: the result is not wanted
    }
  }
  close(socket);
}

void run_eval(const EvalArgs& args) {
  if (args.path.empty() == args.checkpoint.empty()) {
    throw UsageError("eval: name one run directory or checkpoint (RUN_DIR, or --checkpoint FILE)");
  }
  if (args.greedy && args.sample)
    throw UsageError("eval: --greedy and --sample exclude each other");
  RunPolicy run = load_run_policy(args.path.empty() ? args.checkpoint : args.path, "eval");
  const Config& config = run.config;
  const EnvSpec& spec = run.spec;
  if (!args.dump_forward.empty()) {
    ModelConfig::FastPath mode = config.model.fast_path;
    if (!args.fast_path.empty())
      mode = args.fast_path == "off" ? ModelConfig::FastPath::kOff : ModelConfig::FastPath::kAuto;
    dump_forward(run, args.dump_forward[0], args.dump_forward[1], mode);
    std::cout << fmt::format("eval {}: the network's outputs for {} written to {}\n",
                             run.checkpoint, args.dump_forward[0], args.dump_forward[1]);
    return;
  }
  const std::string& file = run.checkpoint;
  PolicyNet& model = run.model;
  const learner::Checkpoint& ckpt = run.ckpt;
  const uint64_t seed =
      args.seed.value_or(actor::evaluation_seed(static_cast<uint64_t>(config.run.seed)));
  const int64_t episodes = args.episodes.value_or(config.run.eval_episodes);
  torch::manual_seed(seed);
  const actor::Evaluation e =
      args.video.empty() ? actor::evaluate_policy(model, config.env, episodes, !args.sample, seed,
                                                  nullptr, config.model.fast_path)
                         : record_episodes(model, config.env, episodes, !args.sample, seed,
                                           config.model.fast_path, args.video);
  if (!args.episodes_out.empty()) write_episodes(args.episodes_out, e);
  const char* policy = args.sample ? "sampled" : "greedy";
  if (args.json) {
    std::cout << fmt::format(
        "{{\"checkpoint\": {}, \"env\": {}, \"policy\": \"{}\", \"seed\": {}, \"episodes\": {}, "
        "\"return_mean\": {}, \"return_std\": {}, \"return_min\": {}, \"return_max\": {}, "
        "\"checkpoint_env_steps\": {}, \"steps_taken\": {}}}\n",
        json_string(file), json_string(spec.name), policy, seed, e.returns.size(), e.mean, e.std,
        e.min, e.max, ckpt.counters.env_steps, e.env_steps);
    return;
  }
  std::cout << fmt::format(
      "eval {} ({} policy, env {}, {} episodes): return mean {:.2f}, std {:.2f}, min {:.2f}, "
      "max {:.2f}\n",
      file, policy, spec.name, e.returns.size(), e.mean, e.std, e.min, e.max);
  if (!args.video.empty())
    std::cout << fmt::format("video of {} env steps: {}\n", e.env_steps, args.video);
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* command = app.add_subcommand(
      "eval", "Return statistics of a run's (best, else newest) or a checkpoint's policy");
  command->add_option("path", args->path,
                      "a run directory (its checkpoints/best.ckpt, else its newest checkpoint) or "
                      "a .ckpt file");
  command->add_option("--checkpoint", args->checkpoint, "a .ckpt file in a run's checkpoints/");
  command->add_option("--episodes", args->episodes, "episodes to run (default: run.eval_episodes)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  command->add_flag("--greedy", args->greedy,
                    "the most likely action, the Gaussian's mean (default)");
  command->add_flag("--sample", args->sample, "sample actions from the policy instead");
  command->add_flag("--json", args->json, "print one JSON object");
  command->add_option("--seed", args->seed,
                      "seed of the envs and the sampling (default: the run's evaluation seed)");
  CLI::Option* dump =
      command
          ->add_option("--dump-forward", args->dump_forward,
                       "OBS OUT: the network's outputs for the observations in OBS (safetensors: "
                       "\"obs\" [T, K, obs...], optional \"episode_start\" [T, K]) written to OUT, "
                       "through the actors' policy; no episodes run")
          ->expected(2);
  command->add_option("--video", args->video,
                      "record the episodes, one after another on one env, to this file through "
                      "ffmpeg (.mp4: H.264): a Gymnasium or Python env's own frames, a pixel env's "
                      "observations");
  command->add_option("--episodes-out", args->episodes_out,
                      "write each episode's return and length to this file, one JSON object a "
                      "line");
  command
      ->add_option("--fast-path", args->fast_path,
                   "with --dump-forward: auto or off (default: the run's model.fast_path)")
      ->check(CLI::IsMember({"auto", "off"}))
      ->needs(dump);
  // The outputs of given observations, not episodes: the episodes' flags go with no dump.
  for (const char* flag :
       {"--video", "--episodes-out", "--sample", "--greedy", "--json", "--episodes", "--seed"}) {
    dump->excludes(command->get_option(flag));
  }
  return {command, [args] { run_eval(*args); }};
}

Command add_evaluation_process_command(CLI::App& app) {
  auto target = std::make_shared<fleet::EvaluationTarget>();
  CLI::App* command = app.add_subcommand(fleet::kEvaluationProcessCommand,
                                         "An evaluation process, started by the learner");
  command->group("");  // internal: not listed in --help
  // The command line fleet/actor_command.h builds.
  command->add_option(fleet::kConfigFlag, target->config_path, "the run's config.toml")->required();
  command->add_option(fleet::kSocketFlag, target->socket, "the learner's local socket")->required();
  command->add_option(fleet::kParentFlag, target->parent, "stop when this process is gone");
  return {command, [target] { run_evaluation_process(*target); }};
}

}  // namespace pronghorn::cli
