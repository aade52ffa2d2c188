// `pronghorn status [--json] [--watch]`: the running job's status as a
// readable table, as JSON (the same keys as metrics.jsonl), or live; a watch
// ends saying when and how the job ended (its exit_status line). With
// --run-dir of a job that has ended, how it ended: its exit_status line and
// its last metrics.jsonl line, without asking any learner.
#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "core/clock.h"
#include "core/error.h"
#include "proto/json_string.h"
#include "proto/status_json.h"
#include "tools/cli.h"
#include "tools/control_client.h"
#include "tools/exit_record.h"

namespace pronghorn::cli {
namespace {

struct StatusArgs {
  ControlArgs control;
  bool json = false;
  bool watch = false;
  double interval_s = 1;
};

std::string ago(double unix_s) { return fmt::format("{:.0f} s ago", unix_seconds() - unix_s); }

// 42 s, 3 min 05 s, 2 h 07 min.
std::string duration_text(double s) {
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t < 60) return fmt::format("{} s", t);
  if (t < 3600) return fmt::format("{} min {:02} s", t / 60, t % 60);
  return fmt::format("{} h {:02} min", t / 3600, t % 3600 / 60);
}

// running, stopping, or finished and how; a learner older than Status.state has only `stopping`.
std::string state_text(const v1::Status& s) {
  if (s.state().empty()) return s.stopping() ? "stopping" : "running";
  return s.end_reason().empty() ? s.state() : s.state() + ": " + s.end_reason();
}

std::string progress_text(const v1::Status& s) {
  if (s.total_steps() == 0) return fmt::format("{} env steps", s.env_steps());
  std::string out = fmt::format("{} of {} env steps ({:.1f}%)", s.env_steps(), s.total_steps(),
                                100.0 * static_cast<double>(s.env_steps()) / s.total_steps());
  if (s.env_steps() < s.total_steps() && s.sps() > 0 && s.state() != "finished") {
    out += ", ETA " + duration_text(static_cast<double>(s.total_steps() - s.env_steps()) / s.sps());
  }
  return out;
}

std::string table(const v1::Status& s) {
  const auto& r = s.episode_return();
  const auto& l = s.loss();
  std::string out;
  auto row = [&](const char* name, const std::string& value) {
    out += fmt::format("{:<15}{}\n", name, value);
  };
  row("run", fmt::format("{}  ({})", s.run_name(), s.run_dir()));
  row("state", state_text(s));
  if (!s.health().empty()) row("health", s.health());
  row("env", s.env_name());
  row("uptime", fmt::format("{:.1f} s", s.uptime_s()));
  row("progress", progress_text(s));
  row("target", s.target_return() != 0
                    ? fmt::format("mean return {:g} on evaluation and over the last 100 episodes",
                                  s.target_return())
                    : std::string("none (run.target_return = 0)"));
  row("env steps", fmt::format("{}  ({:.0f} steps/s)", s.env_steps(), s.sps()));
  row("learner steps", fmt::format("{}  ({:.1f} steps/s, policy version {})", s.learner_steps(),
                                   s.learner_steps_per_s(), s.policy_version()));
  row("episodes", fmt::format("{}", s.episodes()));
  row("return", r.count() == 0
                    ? std::string("no finished episode yet")
                    : fmt::format("mean {:.2f}  min {:.2f}  max {:.2f}  (last {}, "
                                  "{:.1f} steps long on average)",
                                  r.mean(), r.min(), r.max(), r.count(), s.episode_length_mean()));
  row("evaluation", s.eval_episodes() == 0
                        ? std::string("none yet")
                        : fmt::format("mean {:.2f}  std {:.2f}  ({} greedy episodes, policy at {} "
                                      "env steps)",
                                      s.eval_return_mean(), s.eval_return_std(), s.eval_episodes(),
                                      s.eval_env_steps()));
  row("loss", fmt::format("total {:.4f}  policy {:.4f}  value {:.4f}  entropy {:.4f}", l.total(),
                          l.policy(), l.value(), l.entropy()));
  row("grad norm", fmt::format("{:.4f}", s.grad_norm()));
  row("learning rate", fmt::format("{:.4g}", s.learning_rate()));
  row("policy lag", fmt::format("mean {:.2f}  max {}", s.policy_lag_mean(), s.policy_lag_max()));
  row("ratio pi/mu", fmt::format("outside 1 +- ppo_clip {:.3f}  approx KL {:.4f}",
                                 l.clip_fraction(), l.approx_kl()));
  row("ring", fmt::format("{}/{} slots ready; unrolls committed {}, consumed {}, dropped stale {}",
                          s.ring_occupancy(), s.ring_slots(), s.unrolls_committed(),
                          s.unrolls_consumed(), s.unrolls_dropped_stale()));
  row("actors", fmt::format("{} alive / {} desired, {} restarts", s.actors_alive(),
                            s.actors_desired(), s.actor_restarts()));
  const auto& t = s.stage_time();
  const double actor = std::max(1e-9, t.actor_env_s() + t.actor_policy_s() + t.actor_wait_s());
  const double learner =
      std::max(1e-9, t.learner_wait_s() + t.learner_batch_s() + t.learner_forward_s() +
                         t.learner_backward_s() + t.learner_optimizer_s() + t.learner_publish_s());
  row("actor time",
      fmt::format("env {:.0f}%  policy {:.0f}%  waiting {:.0f}%", 100 * t.actor_env_s() / actor,
                  100 * t.actor_policy_s() / actor, 100 * t.actor_wait_s() / actor));
  row("learner time",
      fmt::format("waiting {:.0f}%  batch {:.0f}%  forward {:.0f}%  backward {:.0f}%  "
                  "optimizer {:.0f}%  publish {:.0f}%",
                  100 * t.learner_wait_s() / learner, 100 * t.learner_batch_s() / learner,
                  100 * t.learner_forward_s() / learner, 100 * t.learner_backward_s() / learner,
                  100 * t.learner_optimizer_s() / learner, 100 * t.learner_publish_s() / learner));
  row("checkpoint",
      s.last_checkpoint_path().empty()
          ? std::string("none yet")
          : fmt::format("{}  ({})", s.last_checkpoint_path(), ago(s.last_checkpoint_unix_s())));
  row("metrics", s.metrics_port() ? fmt::format("http://127.0.0.1:{}/metrics", s.metrics_port())
                                  : std::string("off"));
  row("config digest", s.config_digest());
  if (s.world_size() > 1) {
    row("learners", fmt::format("rank {} of {} on {}; all-reduce {:.1f} ms (last step)", s.rank(),
                                s.world_size(), s.node_name(), 1e3 * s.allreduce_s()));
  }
  if (s.ranks_size() > 0) {  // rank 0: the whole job
    out += fmt::format("\n{:>4}  {:<16} {:>12} {:>14} {:>8} {:>6} {:>11}  {}\n", "rank", "node",
                       "steps/s", "env steps", "actors", "ring", "all-reduce", "control");
    double sps = 0;
    uint64_t steps = 0;
    for (const v1::RankStatus& k : s.ranks()) {
      out += fmt::format("{:>4}  {:<16} {:>12.0f} {:>14} {:>8} {:>6} {:>8.1f} ms  {}\n", k.rank(),
                         k.node_name(), k.sps(), k.local_env_steps(),
                         fmt::format("{}/{}", k.actors_alive(), k.actors_desired()),
                         k.ring_occupancy(), 1e3 * k.allreduce_s(), k.control_address());
      sps += k.sps();
      steps += k.local_env_steps();
    }
    out += fmt::format("{:>4}  {:<16} {:>12.0f} {:>14}\n", "", "total", sps, steps);
  }
  if (!s.remote_address().empty()) {  // actor-only nodes join there
    out += fmt::format("\nactor-only nodes join at {}\n", s.remote_address());
    if (s.remote_nodes_size() > 0) {
      out +=
          fmt::format("{:<16} {:>9} {:>10} {:>12} {:>10} {:>8} {:>11}  {}\n", "node", "processes",
                      "unrolls/s", "unrolls", "last seen", "session", "disconnects", "peer");
    }
    for (const v1::RemoteNode& n : s.remote_nodes()) {
      out += fmt::format("{:<16} {:>9} {:>10.1f} {:>12} {:>8.1f} s {:>8} {:>11}  {}\n", n.name(),
                         fmt::format("{}/{}", n.processes_alive(), n.processes_desired()),
                         n.unrolls_per_s(), n.unrolls(), n.last_seen_s(),
                         n.connected() ? n.session().substr(0, 8) : "(none)", n.disconnects(),
                         n.peer());
    }
  }
  return out;
}

void print(const v1::Status& s, const StatusArgs& args) {
  if (args.json) {
    std::cout << status_json(s) << std::endl;
  } else if (args.watch && isatty(STDOUT_FILENO)) {
    std::cout << "\x1b[H\x1b[2J" << table(s) << std::flush;  // redraw in place
  } else {
    std::cout << table(s) << (args.watch ? "\n" : "") << std::flush;
  }
}

std::string local_time_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  return text;
}

// The line the job's process leaves in its run directory when it exits
// (tools/exit_record.h), waited for a while: the stream ends before the
// process does. "" when none comes (killed by a signal, or the run
// directory is on another machine).
std::string exit_line(const std::string& run_dir, double timeout_s) {
  if (run_dir.empty() || !std::filesystem::is_directory(run_dir)) return "";
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    if (std::string line = read_exit_record(run_dir); !line.empty()) return line;
    if (std::chrono::steady_clock::now() >= deadline) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// `status --watch` until the stream ends, then when and how the job ended.
void watch(ControlClient& client, const StatusArgs& args) {
  std::optional<v1::Status> last;
  std::string lost;  // why the stream broke, if it did
  try {
    client.watch(args.interval_s, [&](const v1::Status& s) {
      last = s;
      print(s, args);
    });
  } catch (const Error& e) {
    if (!last) throw;  // never reached the learner: the error as before
    lost = e.what();
  }
  if (!last) return;
  const std::string dir = args.control.run_dir.empty() ? last->run_dir() : args.control.run_dir;
  const std::string exit = exit_line(dir, args.control.timeout_s);
  if (!lost.empty() && exit.empty()) {
    throw Error(fmt::format("the learner went away at {} ({}); its last status: {} at {} env steps",
                            local_time_now(), lost, state_text(*last), last->env_steps()));
  }
  // --json keeps stdout JSON: the ending goes to stderr there.
  std::ostream& out = args.json ? std::cerr : std::cout;
  out << fmt::format("job ended at {}: {} at {} env steps", local_time_now(), state_text(*last),
                     last->env_steps());
  if (last->episode_return().count() > 0) {
    out << fmt::format(", mean return {:.2f}", last->episode_return().mean());
  }
  out << "\n";
  out << (exit.empty() ? fmt::format("no exit record in {}/exit_status (on another machine?)", dir)
                       : "exit " + exit)
      << std::endl;
}

// The last line of `dir`/metrics.jsonl, "" when there is none.
std::string last_metrics_line(const std::string& dir) {
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// How the job of run directory `dir` ended, from its exit_status line and
// its last report, when it has ended (a starting job removes the line);
// false when there is no exit_status line. The reply as `status` would give
// it: a table, or one JSON object with --json.
bool print_ended_run(const std::string& dir, bool json) {
  const std::string exit = read_exit_record(dir);
  if (exit.empty()) return false;
  const size_t space = exit.find(' ');
  const std::string code = exit.substr(0, space);
  const std::string reason = space == std::string::npos ? "" : exit.substr(space + 1);
  const std::string metrics = last_metrics_line(dir);
  google::protobuf::Struct last;
  const bool parsed =
      !metrics.empty() && google::protobuf::util::JsonStringToMessage(metrics, &last).ok();
  if (json) {
    std::cout << fmt::format(
        "{{\"run_dir\": {}, \"state\": \"ended\", \"exit_code\": {}, \"exit_reason\": {}, "
        "\"last_metrics\": {}}}\n",
        json_string(dir),
        !code.empty() && std::all_of(code.begin(), code.end(), ::isdigit) ? code : "null",
        json_string(reason), parsed ? metrics : "null");
    return true;
  }
  auto number = [&](const char* key) {
    const auto it = last.fields().find(key);
    return it == last.fields().end() ? std::nan("") : it->second.number_value();
  };
  auto text = [&](const char* key) {
    const auto it = last.fields().find(key);
    return it == last.fields().end() ? std::string() : it->second.string_value();
  };
  auto row = [](const char* name, const std::string& value) {
    std::cout << fmt::format("{:<15}{}\n", name, value);
  };
  row("run", fmt::format("{}  ({})", parsed ? text("run_name") : "?", dir));
  row("state", fmt::format("ended, exit {}: {}", code, reason));
  if (!parsed) {
    row("last report", "none in " + dir + "/metrics.jsonl");
    return true;
  }
  const double uptime = number("uptime_s");
  row("last report",
      fmt::format("{:.0f} env steps, {:.0f} learner steps, after {}", number("env_steps"),
                  number("learner_steps"), std::isfinite(uptime) ? duration_text(uptime) : "?"));
  if (number("episode_return_count") > 0) {
    row("return", fmt::format("mean {:.2f} over the last {:.0f} episodes",
                              number("episode_return_mean"), number("episode_return_count")));
  }
  if (number("eval_episodes") > 0) {
    row("evaluation",
        fmt::format("mean {:.2f} over {:.0f} greedy episodes at {:.0f} env steps",
                    number("eval_return_mean"), number("eval_episodes"), number("eval_env_steps")));
  }
  return true;
}

}  // namespace

Command add_status_command(CLI::App& app) {
  auto args = std::make_shared<StatusArgs>();
  CLI::App* command = app.add_subcommand("status", "Show a running job's status (gRPC)");
  add_control_options(command, args->control);
  command->add_flag("--json", args->json, "one JSON object (a line per update with --watch)");
  command->add_flag("--watch", args->watch, "keep printing until the job ends (Ctrl-C stops)");
  command->add_option("--interval", args->interval_s, "seconds between updates with --watch")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  return {command, [args] {
            // A run directory whose job has ended answers for itself.
            if (!args->control.run_dir.empty() && args->control.target.empty() &&
                print_ended_run(args->control.run_dir, args->json))
              return;
            ControlClient client(args->control);
            if (!args->watch) return print(client.status(), *args);
            watch(client, *args);
          }};
}

}  // namespace pronghorn::cli
