// Helpers for tests of actor-only nodes (issue 17) on two network
// namespaces: the learner (`pronghorn train`, actor.count = 0) in namespace
// a, serving remote.address on a's veth address; nodes (`pronghorn actor`)
// in namespace b. Each process writes stdout and stderr to one log file; its
// RankProcess SIGTERMs, then SIGKILLs and reaps it on every exit path. The
// control plane listens on a's loopback, so `status`, `stop` and `scale` run
// inside namespace a. Link pronghorn_testing_netns.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/cluster_job.h"
#include "tests/testing/job.h"
#include "tests/testing/netns.h"

namespace pronghorn::testing {

// One node as `pronghorn status --json` lists it (Status.remote_nodes).
struct RemoteNodeRow {
  std::string name, session, peer;
  bool connected = false;
  uint64_t processes_alive = 0, processes_desired = 0, unrolls = 0, disconnects = 0;
  double unrolls_per_s = 0, last_seen_s = 0;
};

// One answer of `pronghorn status --json`.
struct StatusView {
  std::string json;
  std::string remote_address;
  std::vector<RemoteNodeRow> nodes;

  // The row of node `name`, if listed.
  std::optional<RemoteNodeRow> node(const std::string& name) const {
    for (const RemoteNodeRow& row : nodes) {
      if (row.name == name) return row;
    }
    return std::nullopt;
  }
};

// The raw text of "key": value in `json` (a string keeps its quotes), or "".
inline std::string json_value(const std::string& json, const std::string& key) {
  const std::regex pattern("\"" + key + R"(": ("(?:[^"\\]|\\.)*"|[^,}\]]+))");
  std::smatch m;
  return std::regex_search(json, m, pattern) ? m[1].str() : "";
}

inline std::string json_string(const std::string& json, const std::string& key) {
  const std::string raw = json_value(json, key);
  return raw.size() >= 2 && raw.front() == '"' ? raw.substr(1, raw.size() - 2) : "";
}

inline double json_number(const std::string& json, const std::string& key) {
  const std::string raw = json_value(json, key);
  try {
    return raw.empty() || raw == "null" ? -1 : std::stod(raw);
  } catch (const std::exception&) {
    return -1;
  }
}

// Status.remote_nodes: an array of flat objects (proto/status_json.cpp).
inline StatusView parse_status(const std::string& json) {
  StatusView view;
  view.json = json;
  view.remote_address = json_string(json, "remote_address");
  const size_t array = json.find("\"remote_nodes\": [");
  if (array == std::string::npos) return view;
  const size_t end = json.find(']', array);
  size_t at = array;
  while ((at = json.find('{', at)) != std::string::npos && at < end) {
    const size_t close = json.find('}', at);
    const std::string object = json.substr(at, close - at + 1);
    RemoteNodeRow row;
    row.name = json_string(object, "name");
    row.session = json_string(object, "session");
    row.peer = json_string(object, "peer");
    row.connected = json_value(object, "connected") == "true";
    row.processes_alive = static_cast<uint64_t>(json_number(object, "processes_alive"));
    row.processes_desired = static_cast<uint64_t>(json_number(object, "processes_desired"));
    row.unrolls = static_cast<uint64_t>(json_number(object, "unrolls"));
    row.disconnects = static_cast<uint64_t>(json_number(object, "disconnects"));
    row.unrolls_per_s = json_number(object, "unrolls_per_s");
    row.last_seen_s = json_number(object, "last_seen_s");
    view.nodes.push_back(row);
    at = close;
  }
  return view;
}

// The learner's line at its end, per node (info).
struct LearnerNodeLine {
  uint64_t unrolls = 0, sessions = 0, disconnects = 0;
};
inline std::optional<LearnerNodeLine> learner_node_line(const std::string& log,
                                                        const std::string& node) {
  const std::regex pattern("remote node " + node +
                           R"(: (\d+) unrolls over (\d+) sessions \((\d+) disconnects\))");
  std::optional<LearnerNodeLine> last;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    last = LearnerNodeLine{std::stoull((*it)[1]), std::stoull((*it)[2]), std::stoull((*it)[3])};
  }
  return last;
}

// The node's line at its exit: committed = acked + lost + discarded + unsent.
struct NodeAccounting {
  uint64_t committed = 0, acked = 0, lost = 0, discarded = 0, unsent = 0;
  bool adds_up() const { return committed == acked + lost + discarded + unsent; }
};
inline std::optional<NodeAccounting> node_accounting(const std::string& log,
                                                     const std::string& node) {
  const std::regex pattern("node " + node +
                           R"(: unrolls committed (\d+) = acked (\d+) \+ lost in flight (\d+) )"
                           R"(\+ discarded (\d+) \+ unsent (\d+))");
  std::optional<NodeAccounting> last;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    last = NodeAccounting{std::stoull((*it)[1]), std::stoull((*it)[2]), std::stoull((*it)[3]),
                          std::stoull((*it)[4]), std::stoull((*it)[5])};
  }
  return last;
}

// The time (Unix seconds) of the first line of `log` holding every one of
// `needles`, from spdlog's local-time prefix "YYYY-MM-DD HH:MM:SS.mmm"; nothing
// when no line holds them all.
inline std::optional<double> log_line_time(const std::string& log,
                                           const std::vector<std::string>& needles) {
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    bool all = true;
    for (const std::string& n : needles) all = all && line.find(n) != std::string::npos;
    if (!all) continue;
    std::tm tm{};
    int millis = 0;
    if (std::sscanf(line.c_str(), "%d-%d-%d %d:%d:%d.%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &millis) != 7) {
      continue;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_isdst = -1;
    return static_cast<double>(std::mktime(&tm)) + millis / 1000.0;
  }
  return std::nullopt;
}

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A running process's children and pid, to check once it has exited that
// it left nothing behind.
struct Leftovers {
  pid_t pid = -1;
  std::vector<pid_t> children;

  static Leftovers of(const RankProcess& process) {
    return {process.pid(), children_of(process.pid())};
  }
  // "" when its children are gone (within 5 s) and /dev/shm holds no
  // segment named with its pid; else what is left.
  std::string after_exit() const {
    std::string left;
    if (!all_gone(children, std::chrono::seconds(5))) left += "a child outlived it; ";
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
      const auto fields = buffer::parse_segment_name(entry.path().filename().string());
      if (fields && fields->pid == pid) left += "segment " + entry.path().string() + "; ";
    }
    return left;
  }
};

// Resident memory of `pid` in KiB (VmRSS), or -1 once it is gone.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// A job of one learner in namespace a and its nodes in namespace b, in a
// temporary directory of its own that the destructor removes (declare the
// RankProcesses after the job: they end first).
class RemoteJob {
 public:
  using Side = NetnsPair::Side;

  explicit RemoteJob(const NetnsPair& net)
      : net_(net),
        name("rt" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()),
        base(::testing::TempDir() + "/" + name),
        run(base + "/runs/" + name) {
    std::filesystem::remove_all(base);
    std::filesystem::create_directories(base + "/runs");
  }
  ~RemoteJob() { std::filesystem::remove_all(base); }
  RemoteJob(const RemoteJob&) = delete;
  RemoteJob& operator=(const RemoteJob&) = delete;

  // `pronghorn train` in namespace a with no local actors, remote.address on
  // a's veth address (port 0), the control plane on a's loopback, reports
  // every 0.5 s, then `sets` ("key=value"); its log in learner.log.
  RankProcess start_learner(const std::vector<std::string>& sets) const {
    std::vector<std::string> argv = command("train");
    std::vector<std::string> all = {"run.name=" + name,
                                    "run.dir=" + base + "/runs",
                                    "actor.count=0",
                                    "remote.address=" + net_.address_a() + ":0",
                                    "server.address=127.0.0.1:0",
                                    "server.metrics_port=-1",
                                    "run.report_interval_s=0.5"};
    all.insert(all.end(), sets.begin(), sets.end());
    for (const std::string& s : all) argv.insert(argv.end(), {"--set", s});
    return spawn(Side::a, argv, "learner.log");
  }

  // `train --resume` of this job's run in namespace a, serving `remote_address`.
  RankProcess resume_learner(const std::string& remote_address,
                             const std::vector<std::string>& sets,
                             const std::string& log = "learner-resumed.log") const {
    std::vector<std::string> argv = command("train");
    argv.insert(argv.end(), {"--resume", run, "--set", "remote.address=" + remote_address});
    for (const std::string& s : sets) argv.insert(argv.end(), {"--set", s});
    return spawn(Side::a, argv, log);
  }

  // `pronghorn actor` named `node` in namespace b, joining `learner` with
  // the job's token file and one process, then `extra` arguments.
  RankProcess start_node(const std::string& learner, const std::vector<std::string>& extra = {},
                         const std::string& node = "n1", const std::string& token_file = "") const {
    std::vector<std::string> argv = command("actor");
    argv.insert(argv.end(), {"--learner", learner, "--token-file",
                             token_file.empty() ? run + "/token" : token_file, "--processes", "1",
                             "--name", node});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return spawn(Side::b, argv, "node-" + node + ".log");
  }

  // The gateway's bound address (run/remote.address), "" when not written in
  // time. Waits for the token and the control plane's address as well: the
  // learner writes them in an order of its own.
  std::string remote_address(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const auto left = [&] {
      return std::max(std::chrono::milliseconds(1),
                      std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now()));
    };
    std::string address = wait_for_line_file(run + "/remote.address", left());
    if (wait_for_line_file(run + "/token", left()).empty()) return "";
    if (wait_for_line_file(run + "/server.address", left()).empty()) return "";
    return address;
  }

  // `pronghorn <command> --run-dir run <args>` inside namespace a: exit code, output.
  std::pair<int, std::string> control(const std::string& command,
                                      const std::string& args = "") const {
    return run_command(net_.exec_prefix(Side::a) + " " + PRONGHORN_BIN + " " + command +
                       " --run-dir " + run + " --timeout 5 " + args);
  }

  // The learner's status, or nothing when it does not answer.
  std::optional<StatusView> status() const {
    auto [code, out] = control("status", "--json");
    if (code != 0) return std::nullopt;
    return parse_status(out);
  }

  // Polls status until `ready` holds for it, within `timeout`; the last answer.
  std::optional<StatusView> wait_status(const std::function<bool(const StatusView&)>& ready,
                                        std::chrono::milliseconds timeout) const {
    std::optional<StatusView> last;
    wait_for(
        [&] {
          auto now = status();
          if (now) last = now;
          return now && ready(*now);
        },
        timeout);
    return last;
  }

  // The row of `node` once it is connected and has more than `unrolls`
  // unrolls committed, within `timeout`.
  std::optional<RemoteNodeRow> wait_unrolls_past(uint64_t unrolls,
                                                 std::chrono::milliseconds timeout,
                                                 const std::string& node = "n1") const {
    auto view = wait_status(
        [&](const StatusView& s) {
          auto row = s.node(node);
          return row && row->connected && row->unrolls > unrolls;
        },
        timeout);
    if (!view) return std::nullopt;
    auto row = view->node(node);
    if (!row || !row->connected || row->unrolls <= unrolls) return std::nullopt;
    return row;
  }

  std::string log_path(const std::string& log) const { return base + "/" + log; }

  // The last `n` bytes of a log, for failure messages.
  std::string tail(const std::string& log, size_t n = 3000) const {
    return "--- " + log + ":\n" + RankProcess::tail(slurp(log_path(log)), n) + "\n";
  }

 private:
  // `pronghorn --log-level info <subcommand>`, with no token from our environment.
  static std::vector<std::string> command(const char* subcommand) {
    return {"env", "-u", "PRONGHORN_TOKEN", PRONGHORN_BIN, "--log-level", "info", subcommand};
  }

  RankProcess spawn(Side side, const std::vector<std::string>& argv, const std::string& log) const {
    const std::string path = log_path(log);
    return RankProcess(net_.spawn_in(side, argv, path), path, path);
  }

  const NetnsPair& net_;

 public:
  const std::string name;  // the run's name, unique per test and process
  const std::string base;  // the temporary directory of everything
  const std::string run;   // the learner's run directory
};

// Stops the job over its control plane (inside namespace a) and checks that
// both ends exit 0 and account for every unroll: the node's four counters add
// up, and its acked count is what the learner committed from it (`exact`:
// over all its sessions with this one learner process). Returns both lines.
inline std::pair<std::optional<LearnerNodeLine>, std::optional<NodeAccounting>> stop_and_account(
    const RemoteJob& job, RankProcess& learner, RankProcess& node, bool exact = true) {
  const Leftovers node_leftovers = Leftovers::of(node);
  const auto [code, out] = job.control("stop");
  EXPECT_EQ(code, 0) << out;
  const std::optional<int> learner_exit = learner.wait(std::chrono::seconds(60));
  EXPECT_EQ(learner_exit, std::optional<int>(0))
      << "learner after stop: " << status_text(learner_exit) << "\n"
      << job.tail("learner.log") << job.tail("learner-resumed.log");
  const auto stopped = std::chrono::steady_clock::now();
  const std::optional<int> node_exit = node.wait(std::chrono::seconds(20));
  EXPECT_EQ(node_exit, std::optional<int>(0))
      << "node " << seconds_since(stopped) << " s after the learner: " << status_text(node_exit)
      << "\n"
      << job.tail("node-n1.log");
  std::cout << "[ remote   ] node exited " << status_text(node_exit) << " "
            << seconds_since(stopped) << " s after the learner\n";
  EXPECT_EQ(node_leftovers.after_exit(), "") << "the node left something behind";
  EXPECT_TRUE(leftover_segments(job.name).empty()) << joined(leftover_segments(job.name));
  const std::string learner_log = slurp(job.log_path(
      std::filesystem::exists(job.log_path("learner-resumed.log")) ? "learner-resumed.log"
                                                                   : "learner.log"));
  const auto k = learner_node_line(learner_log, "n1");
  const auto a = node_accounting(slurp(job.log_path("node-n1.log")), "n1");
  EXPECT_TRUE(k) << "no `remote node n1: K unrolls over S sessions` line\n"
                 << RankProcess::tail(learner_log, 3000);
  EXPECT_TRUE(a) << "no `node n1: unrolls committed …` line\n" << job.tail("node-n1.log");
  if (!k || !a) return {k, a};
  std::cout << "[ remote   ] learner: " << k->unrolls << " unrolls over " << k->sessions
            << " sessions (" << k->disconnects << " disconnects); node: committed " << a->committed
            << " = acked " << a->acked << " + lost " << a->lost << " + discarded " << a->discarded
            << " + unsent " << a->unsent << "\n";
  EXPECT_TRUE(a->adds_up()) << "committed " << a->committed << " ≠ " << a->acked << " + " << a->lost
                            << " + " << a->discarded << " + " << a->unsent;
  if (exact) {
    EXPECT_EQ(a->acked, k->unrolls) << "the node's acked count is not the learner's";
  } else {
    EXPECT_LE(k->unrolls, a->acked) << "this learner committed more than the node saw acked";
  }
  EXPECT_GT(k->unrolls, 0u);
  return {k, a};
}

}  // namespace pronghorn::testing
