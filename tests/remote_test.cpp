// Actor-only nodes against a real learner, on two network namespaces (issue
// 17): the learner (`train`, actor.count = 0) in namespace a, the node
// (`pronghorn actor`) in namespace b. One node alone trains CartPole to the
// target; a silently cut link is noticed and healed; a SIGKILLed learner
// resumed on the same address is rejoined; `scale --node` reaches the node.
// After each job the node's accounting adds up and what it says the learner
// acked is what the learner says it committed from it. Loss, a rate limit and
// refusals are in remote_faults_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "tests/testing/remote_job.h"

namespace {

using namespace std::chrono_literals;
using namespace pronghorn::testing;
using Clock = std::chrono::steady_clock;

#define SKIP_WITHOUT_NETNS()                                     \
  if (auto why = NetnsPair::unavailable()) GTEST_SKIP() << *why; \
  static_assert(true)

// CartPole's preset (configs/cartpole.toml, the built-in defaults): solved to
// 475 in about 700 k env steps, seconds on one local actor process.
constexpr const char* kTarget = "run.target_return=475";

TEST(RemoteTest, OneNodeAloneTrainsCartPoleToTheTargetAndLeavesWhenTheJobEnds) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner({kTarget, "run.total_steps=20000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << "no remote.address\n" << job.tail("learner.log");
  EXPECT_EQ(address.rfind(net.address_a() + ":", 0), 0u) << address;
  EXPECT_NE(address, net.address_a() + ":0") << "the bound port, not the configured 0";
  const auto token_mode = std::filesystem::status(job.run + "/token").permissions();
  EXPECT_EQ(token_mode & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
  const auto start = Clock::now();
  RankProcess node = job.start_node(address);
  ASSERT_TRUE(wait_for([&] { return !children_of(node.pid()).empty(); }, 30s))
      << "the node started no actor process\n"
      << job.tail("node-n1.log");
  const Leftovers node_leftovers = Leftovers::of(node);

  const std::optional<int> learner_exit = learner.wait(150s);
  ASSERT_EQ(learner_exit, std::optional<int>(0))
      << "learner after " << seconds_since(start) << " s: " << status_text(learner_exit) << "\n"
      << job.tail("learner.log") << job.tail("node-n1.log");
  const auto ended = Clock::now();
  const std::string learner_log = slurp(job.log_path("learner.log"));
  EXPECT_NE(learner_log.find("solved: mean return "), std::string::npos)
      << "the learner ended without reaching the target\n"
      << RankProcess::tail(learner_log, 3000);
  std::cout << "[ remote   ] solved in " << seconds_since(start) << " s from one node\n";
  EXPECT_GE(last_metric(job.run, "episode_return_mean"), 475.0);

  const std::optional<int> node_exit = node.wait(20s);
  ASSERT_EQ(node_exit, std::optional<int>(0))
      << "node " << seconds_since(ended) << " s after the job ended: " << status_text(node_exit)
      << "\n"
      << job.tail("node-n1.log");
  std::cout << "[ remote   ] node exited 0 " << seconds_since(ended) << " s after the learner\n";
  EXPECT_EQ(node_leftovers.after_exit(), "") << "the node left something behind";
  EXPECT_TRUE(leftover_segments(job.name).empty()) << joined(leftover_segments(job.name));
  const auto k = learner_node_line(learner_log, "n1");
  const auto a = node_accounting(slurp(job.log_path("node-n1.log")), "n1");
  ASSERT_TRUE(k) << RankProcess::tail(learner_log, 3000);
  ASSERT_TRUE(a) << job.tail("node-n1.log");
  EXPECT_TRUE(a->adds_up()) << a->committed << " ≠ " << a->acked << " + " << a->lost << " + "
                            << a->discarded << " + " << a->unsent;
  EXPECT_EQ(a->acked, k->unrolls);
  EXPECT_EQ(k->sessions, 1u);
  EXPECT_EQ(k->disconnects, 0u);
  // Unrolls in flight when the job ends may count as lost in flight: no
  // bound on those, only that acked is what the learner committed.
  std::cout << "[ remote   ] learner: " << k->unrolls << " unrolls; node: committed "
            << a->committed << " = acked " << a->acked << " + lost " << a->lost << " + discarded "
            << a->discarded << " + unsent " << a->unsent << "\n";
  // No local actors: every unroll the learner committed came from the node.
  // Its last report is of the step that reached the target; unrolls still
  // arrived until it told the node the job ended.
  EXPECT_LE(last_metric(job.run, "unrolls_committed"), static_cast<double>(k->unrolls));
  EXPECT_GT(last_metric(job.run, "unrolls_committed"), 0.0);
}

// The link goes silent for 8 s: keepalives end the session on both ends in
// about 5 s, the learner lives on (its control plane answers), and after the
// heal the node joins again (a new session) and its unrolls flow again.
TEST(RemoteTest, ACutLinkIsNoticedAndTheNodeRejoinsAfterTheHeal) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner({"run.target_return=0", "run.total_steps=1000000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  RankProcess node = job.start_node(address);
  const auto before = job.wait_unrolls_past(10, 60s);
  ASSERT_TRUE(before) << job.tail("learner.log") << job.tail("node-n1.log");

  const auto cut = Clock::now();
  const double cut_unix = unix_now();
  net.cut();
  const auto gone = job.wait_status(
      [](const StatusView& s) {
        auto row = s.node("n1");
        return row && !row->connected;
      },
      15s);
  const double noticed_s = seconds_since(cut);
  ASSERT_TRUE(gone) << "the learner did not answer status during the cut\n"
                    << job.tail("learner.log");
  ASSERT_TRUE(gone->node("n1")) << gone->json;
  EXPECT_FALSE(gone->node("n1")->connected)
      << "the learner still lists the node connected " << noticed_s << " s into the cut\n"
      << gone->json;
  EXPECT_LT(noticed_s, 12.0) << "keepalives should notice a silent link in about 5 s";
  if (!gone->node("n1")->connected) {
    std::cout << "[ remote   ] the learner noticed the cut in " << noticed_s << " s\n";
  }
  std::this_thread::sleep_until(cut + 8s);
  EXPECT_FALSE(learner.wait(0ms)) << "the learner ended during the cut\n"
                                  << job.tail("learner.log");
  EXPECT_FALSE(node.wait(0ms)) << "the node ended during the cut\n" << job.tail("node-n1.log");
  EXPECT_TRUE(job.status()) << "the learner's control plane does not answer during the cut";

  net.heal();
  const auto healed = Clock::now();
  const auto back = job.wait_status(
      [&](const StatusView& s) {
        auto row = s.node("n1");
        return row && row->connected && row->session != before->session &&
               row->unrolls > gone->node("n1")->unrolls;
      },
      40s);
  ASSERT_TRUE(back && back->node("n1")) << job.tail("learner.log") << job.tail("node-n1.log");
  const RemoteNodeRow row = *back->node("n1");
  EXPECT_TRUE(row.connected) << back->json;
  EXPECT_NE(row.session, before->session) << "a rejoin is a new session";
  EXPECT_GE(row.disconnects, 1u) << back->json;
  EXPECT_GT(row.unrolls, gone->node("n1")->unrolls) << "no unroll since the heal\n" << back->json;
  std::cout << "[ remote   ] rejoined and sending " << seconds_since(healed)
            << " s after the heal; disconnects " << row.disconnects << "\n";

  // The node's side: its log says when it ended the old session.
  const auto ended = log_line_time(slurp(job.log_path("node-n1.log")), {before->session, "ended"});
  ASSERT_TRUE(ended) << "the node never logged the end of session " << before->session << "\n"
                     << job.tail("node-n1.log");
  EXPECT_LT(*ended - cut_unix, 10.0) << "keepalives should end the node's session in about 5 s";
  std::cout << "[ remote   ] the node ended its session " << *ended - cut_unix
            << " s after the cut\n";

  const auto [k, a] = stop_and_account(job, learner, node);
  if (k) {
    EXPECT_GE(k->sessions, 2u);
    EXPECT_GE(k->disconnects, 1u);
  }
}

// The learner is SIGKILLed mid-run and resumed from its checkpoint on the
// same remote address: the node (same --learner) joins the new incarnation
// and its unrolls flow there; stopped, the node exits 0.
TEST(RemoteTest, ANodeRejoinsAKilledLearnerResumedOnTheSameAddress) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner(
      {"run.target_return=0", "run.total_steps=1000000000", "run.checkpoint_interval_s=0.5"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  RankProcess node = job.start_node(address);
  const auto before = job.wait_unrolls_past(10, 60s);
  ASSERT_TRUE(before) << job.tail("learner.log") << job.tail("node-n1.log");
  ASSERT_TRUE(wait_for([&] { return newest_checkpoint(job.run).has_value(); }, 20s))
      << "no checkpoint to resume from\n"
      << job.tail("learner.log");
  std::this_thread::sleep_for(500ms);

  learner.signal(SIGKILL);
  ASSERT_EQ(learner.wait(10s), std::optional<int>(128 + SIGKILL));
  std::filesystem::remove(job.run + "/remote.address");
  const auto killed = Clock::now();
  RankProcess resumed = job.resume_learner(address, {"run.checkpoint_interval_s=0"});
  const std::string again = job.remote_address(30s);
  ASSERT_EQ(again, address) << "the resumed learner serves elsewhere\n"
                            << job.tail("learner-resumed.log");
  // The node backs off up to 10 s between tries: one more try past that.
  const auto first = job.wait_unrolls_past(0, 45s);
  ASSERT_TRUE(first) << "the node did not join the resumed learner\n"
                     << job.tail("learner-resumed.log") << job.tail("node-n1.log");
  EXPECT_NE(first->session, before->session);
  std::cout << "[ remote   ] the node sent to the resumed learner " << seconds_since(killed)
            << " s after the kill\n";
  EXPECT_TRUE(job.wait_unrolls_past(first->unrolls, 20s)) << "its unrolls do not keep coming\n"
                                                          << job.tail("learner-resumed.log");
  EXPECT_FALSE(node.wait(0ms)) << job.tail("node-n1.log");

  // The first learner's acks died with it: only this one's count is known.
  stop_and_account(job, resumed, node, /*exact=*/false);
}

// `pronghorn scale --node n1` reaches an actor-only node: the learner asks
// for two processes, the node runs two; asked for one, back to one.
TEST(RemoteTest, ScaleByNodeNameReachesTheActorNode) {
  SKIP_WITHOUT_NETNS();
  NetnsPair net;
  RemoteJob job(net);
  RankProcess learner = job.start_learner({"run.target_return=0", "run.total_steps=1000000000"});
  const std::string address = job.remote_address();
  ASSERT_FALSE(address.empty()) << job.tail("learner.log");
  RankProcess node = job.start_node(address);
  ASSERT_TRUE(job.wait_unrolls_past(0, 60s)) << job.tail("learner.log") << job.tail("node-n1.log");
  for (const int wanted : {2, 1}) {
    const auto [code, out] = job.control("scale", "--node n1 --actors " + std::to_string(wanted));
    ASSERT_EQ(code, 0) << out;
    const auto view = job.wait_status(
        [&](const StatusView& s) {
          auto row = s.node("n1");
          return row && row->processes_desired == static_cast<uint64_t>(wanted) &&
                 row->processes_alive == static_cast<uint64_t>(wanted);
        },
        30s);
    ASSERT_TRUE(view && view->node("n1")) << job.tail("learner.log");
    EXPECT_EQ(view->node("n1")->processes_desired, static_cast<uint64_t>(wanted)) << view->json;
    EXPECT_EQ(view->node("n1")->processes_alive, static_cast<uint64_t>(wanted))
        << view->json << job.tail("node-n1.log");
  }
  stop_and_account(job, learner, node);
}

}  // namespace
