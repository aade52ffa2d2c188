// Actor-only nodes over a bad link and refused (issue 17), on two network
// namespaces like remote_test.cpp: 30% of the node's packets dropped by
// nftables, or its uplink held to 1 mbit/s by tc tbf, each for a fixed time
// (counters asserted, not a solve); a wrong token, a different env plugin,
// a Python env's other packages and a learner that never answers end the
// node with exit 2, 2, 2 and 75.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "envs/testing/python_envs.h"
#include "tests/testing/remote_job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
using Clock = std::chrono::steady_clock;
using Side = NetnsPair::Side;

#define SKIP_WITHOUT_NETNS()                                     \
  if (auto why = NetnsPair::unavailable()) GTEST_SKIP() << *why; \
  static_assert(true)

// A learner training until stopped and node n1 sending to it; false (with
// the logs in the failure) when the node's unrolls do not arrive.
struct RunningJob {
  RemoteJob job;
  RankProcess learner, node;
  explicit RunningJob(const NetnsPair& net) : job(net) {}
  ::testing::AssertionResult start(const std::vector<std::string>& sets = {}) {
    std::vector<std::string> all = {"run.target_return=0", "run.total_steps=1000000000"};
    all.insert(all.end(), sets.begin(), sets.end());
    learner = job.start_learner(all);
    const std::string address = job.remote_address();
    if (address.empty()) return ::testing::AssertionFailure() << job.tail("learner.log");
    node = job.start_node(address);
    if (!job.wait_unrolls_past(10, 60s)) {
      return ::testing::AssertionFailure() << job.tail("learner.log") << job.tail("node-n1.log");
    }
    return ::testing::AssertionSuccess();
  }
  // Unrolls committed from n1 so far (0 when status does not answer).
  double unrolls() const {
    const auto s = job.status();
    return s && s->node("n1") ? static_cast<double>(s->node("n1")->unrolls) : 0;
  }
};

// Starts node `name` (its arguments `extra`) and expects it refused: exit 2
// within `timeout`, no retry. Its last line; "" when it was not refused.
std::string refused_line(const RemoteJob& job, const std::string& address,
                         const std::vector<std::string>& extra, const std::string& name,
                         std::chrono::seconds timeout) {
  const auto start = Clock::now();
  RankProcess node = job.start_node(address, extra, name);
  const std::optional<int> exit = node.wait(timeout);
  const std::string log = "node-" + name + ".log";
  const std::string line = last_line(slurp(job.log_path(log)));
  EXPECT_EQ(exit, std::optional<int>(2))
      << status_text(exit) << " after " << seconds_since(start) << " s\n"
      << job.tail(log);
  std::cout << "[ remote   ] refused in " << seconds_since(start) << " s: " << line << "\n";
  return exit == std::optional<int>(2) ? line : "";
}

// Runs an nft script inside `side`'s namespace, asserting it worked.
void nft(const NetnsPair& net, Side side, const std::string& script) {
  const auto [code, out] = run_command(net.exec_prefix(side) + " nft '" + script + "'");
  ASSERT_EQ(code, 0) << script << ": " << out;
}

TEST(RemoteFaultsTest, ThirtyPercentLossIsSlowerButNothingIsLostUncounted) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RunningJob j(net);
  ASSERT_TRUE(j.start());
  const double at_start = j.unrolls();
  std::this_thread::sleep_for(5s);
  const double clean_rate = (j.unrolls() - at_start) / 5.0;

  // 30% of what arrives in namespace a over the veth: the node's unrolls
  // and acks of the learner's weights.
  const std::string table = "inet phns_loss";
  nft(net, Side::a,
      "add table " + table + "; add chain " + table +
          " input { type filter hook input priority filter; policy accept; }; add rule " + table +
          " input iifname \"" + net.interface(Side::a) + "\" numgen random mod 100 < 30 drop");
  const auto lossy = Clock::now();
  // Thirds of 30 s: how many had arrived by the end of each.
  const double at_loss = j.unrolls();
  double by[3];
  std::string rates;
  for (int third = 0; third < 3; ++third) {
    std::this_thread::sleep_until(lossy + std::chrono::seconds(10 * (third + 1)));
    by[third] = j.unrolls();
    rates += std::to_string((by[third] - (third == 0 ? at_loss : by[third - 1])) / 10) + " ";
  }
  const double at_end = by[2];
  const auto view = j.job.status();
  EXPECT_FALSE(j.learner.wait(0ms)) << j.job.tail("learner.log");
  EXPECT_FALSE(j.node.wait(0ms)) << j.job.tail("node-n1.log");
  nft(net, Side::a, "delete table " + table);
  std::cout << "[ remote   ] unrolls/s: " << clean_rate << " clean; " << rates
            << "in each 10 s of 30% loss; "
            << (view && view->node("n1") ? view->node("n1")->disconnects : 0) << " disconnects\n";
  // Keepalives may take the lossy link for a dead one (a ping's ack queues
  // behind unrolls and retransmits): a rejoin, backing off, can eat 10 s.
  EXPECT_GT(at_end, at_loss) << "no unroll arrived in 30 s of 30% loss";
  EXPECT_TRUE(j.job.wait_unrolls_past(static_cast<uint64_t>(at_end), 20s))
      << "unrolls did not flow again once the loss ended\n"
      << j.job.tail("node-n1.log");
  stop_and_account(j.job, j.learner, j.node);
}

// The node's uplink at 1 mbit/s: a few CartPole unrolls a second. Credits
// keep what the node has in flight to what the learner granted, so the
// learner's memory stays flat and the node's rate drops to what the link
// carries.
TEST(RemoteFaultsTest, ARateLimitedLinkThrottlesByCreditsWithFlatMemory) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RunningJob j(net);
  ASSERT_TRUE(j.start());
  std::this_thread::sleep_for(5s);  // warm-up: allocators and the ring reach their size
  const double at_start = j.unrolls();
  std::this_thread::sleep_for(5s);
  const double clean_rate = (j.unrolls() - at_start) / 5.0;

  const std::string tc = net.exec_prefix(Side::b) + " tc qdisc ";
  const std::string dev = " dev " + net.interface(Side::b) + " root";
  const auto [code, out] =
      run_command(tc + "add" + dev + " tbf rate 1mbit burst 32kbit latency 400ms");
  ASSERT_EQ(code, 0) << out;
  std::this_thread::sleep_for(3s);  // what was queued drains
  const auto limited = Clock::now();
  const double at_limit = j.unrolls();
  const long learner_base = rss_kib(j.learner.pid()), node_base = rss_kib(j.node.pid());
  long learner_low = learner_base, learner_high = learner_base;
  long node_high = node_base;
  for (int s = 1; s <= 20; ++s) {
    std::this_thread::sleep_until(limited + std::chrono::seconds(s));
    const long l = rss_kib(j.learner.pid()), n = rss_kib(j.node.pid());
    learner_low = std::min(learner_low, l);
    learner_high = std::max(learner_high, l);
    node_high = std::max(node_high, n);
  }
  const double limited_rate = (j.unrolls() - at_limit) / 20.0;
  const auto view = j.job.status();
  run_command(tc + "del" + dev);
  std::cout << "[ remote   ] unrolls/s: " << clean_rate << " clean, " << limited_rate
            << " at 1 mbit/s; learner RSS " << learner_base / 1024 << " MiB [" << learner_low / 1024
            << ", " << learner_high / 1024 << "], node RSS " << node_base / 1024 << " MiB, at most "
            << node_high / 1024 << " MiB\n";
  ASSERT_GT(learner_base, 0);
  EXPECT_GE(learner_low, learner_base * 0.9) << "learner RSS fell more than 10%";
  EXPECT_LE(learner_high, learner_base * 1.1) << "learner RSS grew more than 10%";
  EXPECT_LE(node_high, node_base * 1.1) << "the node's memory grew: unrolls piled up unsent";
  EXPECT_GT(limited_rate, 0) << "nothing arrived through the limited link";
  EXPECT_LT(limited_rate, clean_rate / 2) << "1 mbit/s did not slow the node";
  ASSERT_TRUE(view && view->node("n1")) << j.job.tail("learner.log");
  EXPECT_LT(view->node("n1")->unrolls_per_s, clean_rate / 2) << view->json;
  EXPECT_TRUE(view->node("n1")->connected) << view->json;
  stop_and_account(j.job, j.learner, j.node);
}

// A file holding `text` with mode 0600, like a token file.
std::string private_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0600);
  return path;
}

TEST(RemoteFaultsTest, AWrongTokenIsRefusedWithExit2NamingTheToken) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner({"run.target_return=0", "run.total_steps=1000000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  const auto start = Clock::now();
  RankProcess node =
      job.start_node(address, {}, "n1", private_file(job.base + "/wrong-token", "wrong\n"));
  const std::optional<int> exit = node.wait(15s);
  const std::string text = slurp(job.log_path("node-n1.log"));
  ASSERT_EQ(exit, std::optional<int>(2))
      << status_text(exit) << " after " << seconds_since(start) << " s\n"
      << job.tail("node-n1.log");
  std::cout << "[ remote   ] refused in " << seconds_since(start) << " s: " << last_line(text)
            << "\n";
  EXPECT_NE(last_line(text).find("token"), std::string::npos) << text;
  EXPECT_FALSE(learner.wait(0ms)) << "a refused node ended the job\n" << job.tail("learner.log");
  const auto view = job.status();
  ASSERT_TRUE(view);
  EXPECT_FALSE(view->node("n1") && view->node("n1")->connected) << view->json;
}

// The job's env plugin is examples/corridor.c; a node with the right file
// joins, a node whose --plugin is another build of it (one byte more) is
// refused with a line naming the plugin, and does not retry.
TEST(RemoteFaultsTest, ANodeWithADifferentPluginIsRefusedWithExit2NamingThePlugin) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner({std::string("env.plugin=") + CORRIDOR_PLUGIN,
                                           "run.target_return=0", "run.total_steps=1000000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  RankProcess good = job.start_node(address, {"--plugin", CORRIDOR_PLUGIN}, "good");
  ASSERT_TRUE(job.wait_unrolls_past(0, 60s, "good"))
      << "a node with the job's own plugin did not join\n"
      << job.tail("learner.log") << job.tail("node-good.log");

  const std::string file = std::filesystem::path(CORRIDOR_PLUGIN).filename();
  std::filesystem::create_directories(job.base + "/other");
  const std::string other = job.base + "/other/" + file;
  std::filesystem::copy_file(CORRIDOR_PLUGIN, other);
  std::ofstream(other, std::ios::app) << '\n';
  const std::string line = refused_line(job, address, {"--plugin", other}, "bad", 15s);
  EXPECT_NE(line.find("plugin"), std::string::npos) << line;
  EXPECT_FALSE(good.wait(0ms)) << "the refusal touched the good node\n"
                               << job.tail("node-good.log");
}

// A Python env: a node whose env.python is the learner's joins; one whose
// interpreter is another minor version of Python, with its own packages, is
// refused with exit 2 naming how the packages differ, and does not retry.
TEST(RemoteFaultsTest, ANodeWithOtherEnvPackagesIsRefusedWithExit2NamingThem) {
  SKIP_WITHOUT_NETNS();
  namespace py = pronghorn::envs::testing;
  const std::string python = py::test_python();
  const std::string debian = py::python_version(python);
  const auto [interpreter, version] = py::other_python(
      [&](int minor) { return minor >= 10 && "3." + std::to_string(minor) != debian; });
  if (interpreter.empty()) {
    PRONGHORN_SKIP_UNLESS_CI("no CPython >= 3.10 other than Debian's " + debian +
                             " on this machine (pythonX.Y on PATH or pyenv)");
  }
  const std::string other = py::test_python("--python " + interpreter);
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner =
      job.start_learner({"env.name=gymnasium:CartPole-v1", "env.python=" + python, "env.num_envs=4",
                         "run.target_return=0", "run.total_steps=1000000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  RankProcess good = job.start_node(address, {}, "good");
  ASSERT_TRUE(job.wait_unrolls_past(0, 60s, "good"))
      << "a node with the learner's interpreter did not join\n"
      << job.tail("learner.log") << job.tail("node-good.log");

  const std::string line = refused_line(job, address, {"--python", other}, "bad", 60s);
  py::expect_contains(line, "env gymnasium:CartPole-v1: its packages differ: ");
  py::expect_contains(line, "python " + version + " on this node, " + debian + " at the learner");
  EXPECT_FALSE(good.wait(0ms)) << "the refusal touched the good node\n"
                               << job.tail("node-good.log");
}

// Nothing answers: a port nobody listens on (refused at once), then an
// address behind a silent link (connects time out). Either way the node
// gives up after --give-up-after seconds with exit 75, for a scheduler to
// retry later.
TEST(RemoteFaultsTest, ANodeWithNoLearnerGivesUpWithExit75) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  const std::string token = private_file(job.base + "/token", "no-learner\n");
  for (const bool silent : {false, true}) {
    if (silent) net.cut();
    const std::string node_name = silent ? "cut-link" : "closed-port";
    const auto start = Clock::now();
    RankProcess node =
        job.start_node(net.address_a() + ":9", {"--give-up-after", "3"}, node_name, token);
    const std::optional<int> exit = node.wait(12s);
    const double took = seconds_since(start);
    const std::string log = "node-" + node_name + ".log";
    EXPECT_EQ(exit, std::optional<int>(75))
        << node_name << ": " << status_text(exit) << " after " << took << " s\n"
        << job.tail(log);
    EXPECT_GE(took, 3.0) << node_name << ": gave up before --give-up-after\n" << job.tail(log);
    std::cout << "[ remote   ] " << node_name << ": exit " << status_text(exit) << " after " << took
              << " s: " << last_line(slurp(job.log_path(log))) << "\n";
  }
}

}  // namespace

// Its link cut for good, a node that was sending notices (keepalives) and,
// with nothing answering for --give-up-after seconds, exits 75. Unrolls it
// sent whose acks never came back are lost in flight: the learner committed
// at least what was acked and at most that plus what was lost.
TEST(RemoteFaultsTest, ANodeCutOffFromItsLearnerGivesUpWithExit75) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner({"run.target_return=0", "run.total_steps=1000000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  RankProcess node = job.start_node(address, {"--give-up-after", "6"});
  ASSERT_TRUE(job.wait_unrolls_past(10, 60s)) << job.tail("learner.log") << job.tail("node-n1.log");
  const Leftovers node_leftovers = Leftovers::of(node);
  const auto cut = Clock::now();
  net.cut();
  const std::optional<int> exit = node.wait(25s);
  const double took = seconds_since(cut);
  ASSERT_EQ(exit, std::optional<int>(75))
      << status_text(exit) << " " << took << " s after the cut\n"
      << job.tail("node-n1.log");
  std::cout << "[ remote   ] the cut-off node exited 75 after " << took
            << " s: " << last_line(slurp(job.log_path("node-n1.log"))) << "\n";
  EXPECT_GE(took, 6.0) << "it gave up before --give-up-after";
  EXPECT_EQ(node_leftovers.after_exit(), "") << "the node left something behind";
  EXPECT_FALSE(learner.wait(0ms)) << job.tail("learner.log");
  const auto [code, out] = job.control("stop");
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(learner.wait(60s), std::optional<int>(0)) << job.tail("learner.log");
  const auto k = learner_node_line(slurp(job.log_path("learner.log")), "n1");
  const auto a = node_accounting(slurp(job.log_path("node-n1.log")), "n1");
  ASSERT_TRUE(k) << job.tail("learner.log");
  ASSERT_TRUE(a) << job.tail("node-n1.log");
  std::cout << "[ remote   ] learner: " << k->unrolls << " unrolls; node: committed "
            << a->committed << " = acked " << a->acked << " + lost " << a->lost << " + discarded "
            << a->discarded << " + unsent " << a->unsent << "\n";
  EXPECT_TRUE(a->adds_up());
  EXPECT_GE(k->unrolls, a->acked);
  EXPECT_LE(k->unrolls, a->acked + a->lost);
  EXPECT_EQ(k->disconnects, 1u);
}
