// The actor node's pieces that need no learner: weight chunks → whole
// verified versions, the version map and the local slab, the unroll tally,
// back-off, the checks of a JoinReply, names and temp directories (the two
// streams: node_streams_test.cpp).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "actor/job_check.h"
#include "buffer/process.h"
#include "buffer/segment_names.h"
#include "buffer/weight_slab.h"
#include "core/error.h"
#include "remote/actor_node.h"
#include "remote/node_session.h"
#include "remote/node_uploader.h"
#include "remote/node_weights.h"
#include "remote/testing/weight_chunks.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using testing::chunks_of;
using testing::ramp;

using Result = WeightAssembler::Result;

// Feeds `chunks`; the results in order.
std::vector<Result> feed(WeightAssembler& a, const std::vector<v1::WeightsChunk>& chunks) {
  std::vector<Result> results;
  for (const auto& c : chunks) results.push_back(a.add(c));
  return results;
}

TEST(WeightAssemblerTest, ChunksInOrderMakeTheWholeVersionBitForBit) {
  WeightAssembler a;
  const auto params = ramp(1000);
  const auto results = feed(a, chunks_of(7, params, 1000));  // 4 chunks, the last short
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0], Result::kPartial);
  EXPECT_EQ(results[2], Result::kPartial);
  ASSERT_EQ(results[3], Result::kComplete);
  EXPECT_EQ(a.version(), 7u);
  EXPECT_EQ(a.take(), params);
  EXPECT_EQ(a.refused(), 0u);
}

TEST(WeightAssemblerTest, ACorruptByteRefusesTheVersion) {
  WeightAssembler a;
  auto chunks = chunks_of(3, ramp(512), 512);
  chunks[2].mutable_data()->at(17) ^= 0x40;
  const auto results = feed(a, chunks);
  EXPECT_EQ(results.back(), Result::kRefused);
  EXPECT_NE(a.why().find("CRC-32"), std::string::npos) << a.why();
  EXPECT_EQ(a.refused(), 1u);
}

TEST(WeightAssemblerTest, OutOfOrderChunksRefuseTheVersionAndTheNextWholeOneIsTaken) {
  WeightAssembler a;
  auto chunks = chunks_of(4, ramp(512), 512);
  std::swap(chunks[1], chunks[2]);
  const auto results = feed(a, chunks);
  EXPECT_EQ(results[1], Result::kRefused);
  EXPECT_EQ(results[2], Result::kRefused) << "the rest of a refused version is refused too";
  EXPECT_EQ(results[3], Result::kRefused);
  EXPECT_EQ(a.refused(), 1u);
  const auto params = ramp(512, 9.0f);
  EXPECT_EQ(feed(a, chunks_of(5, params, 512)).back(), Result::kComplete);
  EXPECT_EQ(a.version(), 5u);
  EXPECT_EQ(a.take(), params);
}

TEST(WeightAssemblerTest, AVersionCutShortIsRefusedWhenTheNextStarts) {
  WeightAssembler a;
  auto first = chunks_of(1, ramp(512), 512);
  first.pop_back();
  for (const auto& r : feed(a, first)) EXPECT_EQ(r, Result::kPartial);
  const auto params = ramp(512, 2.0f);
  EXPECT_EQ(feed(a, chunks_of(2, params, 512)).back(), Result::kComplete);
  EXPECT_EQ(a.refused(), 1u) << "version 1 was short";
  EXPECT_EQ(a.version(), 2u);
  EXPECT_EQ(a.take(), params);
}

TEST(WeightAssemblerTest, ChunksOfAnotherVersionOrAnOverrunAreRefused) {
  WeightAssembler a;
  auto v1 = chunks_of(1, ramp(512), 512);
  auto v2 = chunks_of(2, ramp(512), 512);
  EXPECT_EQ(a.add(v1[0]), Result::kPartial);
  EXPECT_EQ(a.add(v2[1]), Result::kRefused) << "another version's chunk mid-version";

  auto over = chunks_of(3, ramp(256), 512);  // 1024 bytes in 2 chunks
  over[1].mutable_data()->append("xxxx");
  EXPECT_EQ(a.add(over[0]), Result::kPartial);
  EXPECT_EQ(a.add(over[1]), Result::kRefused);
  EXPECT_NE(a.why().find("overrun"), std::string::npos) << a.why();

  v1::WeightsChunk odd = chunks_of(4, ramp(4), 16)[0];
  odd.set_total_bytes(15);
  EXPECT_EQ(a.add(odd), Result::kRefused) << "15 bytes are no float32 vector";
  EXPECT_EQ(a.add(chunks_of(5, ramp(512), 512)[1]), Result::kRefused) << "no start before it";
}

TEST(VersionMapTest, MapsLocalVersionsAndForgetsTheOldest) {
  VersionMap m;
  for (uint64_t v = 1; v <= VersionMap::kKept + 10; ++v) m.add(v, {"inc-a", 100 + v});
  EXPECT_EQ(m.size(), VersionMap::kKept);
  EXPECT_FALSE(m.find(10).has_value());
  ASSERT_TRUE(m.find(11).has_value());
  EXPECT_EQ(m.find(11)->version, 111u);
  EXPECT_EQ(m.newest(), (LearnerVersion{"inc-a", 100 + VersionMap::kKept + 10}));
  EXPECT_FALSE(m.find(0).has_value());
}

TEST(LocalWeightsTest, PublishesWholeVersionsIntoASlabMadeToTheirSize) {
  const std::string name =
      buffer::own_segment_name(buffer::kSlabSegment, "node-test-" + std::to_string(getpid()));
  {
    LocalWeights w(name);
    EXPECT_FALSE(w.has_weights());
    const auto first = ramp(300);
    w.publish("inc-a", 41, first);
    ASSERT_TRUE(w.has_weights());
    auto slab = buffer::WeightSlab::attach(name, 300);
    std::vector<float> read(300);
    ASSERT_EQ(slab->read(read.data()), 1u);
    EXPECT_EQ(read, first);
    w.publish("inc-b", 2, ramp(300, 7.0f));
    EXPECT_EQ(w.find(1), (LearnerVersion{"inc-a", 41}));
    EXPECT_EQ(w.find(2), (LearnerVersion{"inc-b", 2}));
    EXPECT_EQ(w.newest(), (LearnerVersion{"inc-b", 2}));
    EXPECT_THROW(w.publish("inc-b", 3, ramp(301)), UsageError);
    EXPECT_EQ(slab->version(), 2u) << "a version of another size is never published";
  }
  EXPECT_THROW(buffer::WeightSlab::attach(name, 300), Error) << "the slab goes with the node";
}

TEST(NodeTallyTest, SessionsSettleIntoAckedAndLost) {
  NodeTally t;
  t.end_session(10, 6, 9);  // the learner got 9 of 10: 3 acks were lost with the link
  EXPECT_EQ(t.acked(), 9u);
  EXPECT_EQ(t.lost(), 1u);
  t.end_session(5, 2, -1);  // unknown to the learner: only the acked landed
  EXPECT_EQ(t.acked(), 11u);
  EXPECT_EQ(t.lost(), 4u);
  t.end_session(4, 4, std::nullopt);  // no Join after it
  t.end_session(3, 2, 99);            // more than went out: at most what was sent
  t.end_session(3, 2, 0);             // less than acked: at least what was acked
  EXPECT_EQ(t.acked(), 11u + 4 + 3 + 2);
  EXPECT_EQ(t.lost(), 4u + 1);
  t.discarded(7);
  const uint64_t committed = 20 + 5 + 7 + 3;
  EXPECT_TRUE(t.adds_up(committed, 3));
  EXPECT_FALSE(t.adds_up(committed, 2));
  EXPECT_EQ(t.line("n1", committed, 3),
            "node n1: unrolls committed 35 = acked 20 + lost in flight 5 + discarded 7 + unsent 3");
}

TEST(BackoffTest, DoublesFromHalfASecondToTenJittered) {
  Backoff b(42);
  const double bases[] = {500, 1000, 2000, 4000, 8000, 10000, 10000};
  for (double base : bases) {
    const auto wait = static_cast<double>(b.next().count());
    EXPECT_GE(wait, base * 0.75);
    EXPECT_LT(wait, base * 1.25);
  }
  b.reset();
  EXPECT_LT(b.next().count(), 625);
}

// What a learner running `config` answers at Join.
v1::JoinReply reply_for(const Config& config) {
  v1::JoinReply r;
  r.set_config_toml(to_toml(config));
  const auto spec = buffer::unroll_spec_for(actor::check_job_config(config),
                                            config.actor.unroll_length, config.env.num_envs);
  r.set_spec_hash(buffer::spec_hash(spec));
  r.set_slot_bytes(buffer::slot_layout(spec).bytes);
  return r;
}

TEST(ReadJobTest, TakesTheLearnersConfigWhenItGivesTheSameSlots) {
  Config config;
  config.env.num_envs = 3;
  config.actor.unroll_length = 5;
  const NodeJob job = read_job(reply_for(config), "h:1", "");
  EXPECT_EQ(job.config.env.num_envs, 3);
  EXPECT_EQ(job.spec.T, 5);
  EXPECT_EQ(job.slot_bytes, reply_for(config).slot_bytes());
  EXPECT_FALSE(job.plugin.has_value());
}

TEST(ReadJobTest, ASpecOrSlotSizeOtherThanTheLearnersIsRefusedNamingBoth) {
  Config config;
  v1::JoinReply reply = reply_for(config);
  reply.set_slot_bytes(reply.slot_bytes() + 64);
  try {
    read_job(reply, "h:1", "");
    FAIL() << "a slot size other than the learner's was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(reply.slot_bytes())), std::string::npos)
        << e.what();
  }
}

TEST(ReadJobTest, AJobPluginThisNodeLacksOrHoldsAnotherOfIsRefused) {
  Config config;
  v1::JoinReply reply = reply_for(config);
  config.env.plugin = "/nonexistent/libjob_env.so";
  reply.set_config_toml(to_toml(config));
  reply.mutable_plugin()->set_file_name("libjob_env.so");
  reply.mutable_plugin()->set_sha256(std::string(64, 'a'));
  EXPECT_THROW(read_job(reply, "h:1", ""), UsageError);

  // A file here whose bytes are not the job's plugin's: refused before it is loaded.
  const std::string path = ::testing::TempDir() + "/node_test_plugin_" + std::to_string(getpid());
  std::ofstream(path) << "not the job's plugin";
  reply.mutable_plugin()->set_abi_version(plugin_identity(path).abi_version());
  try {
    read_job(reply, "h:1", path);
    FAIL() << "another plugin file was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(plugin_identity(path).sha256()), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(std::string(64, 'a')), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(ReadJobTest, APluginForAJobWithoutOneIsRefused) {
  const std::string path = ::testing::TempDir() + "/node_test_noplugin_" + std::to_string(getpid());
  std::ofstream(path) << "a plugin the job does not load";
  try {
    read_job(reply_for(Config{}), "h:1", path);
    FAIL() << "--plugin was taken for a job that loads none";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("loads no env plugin"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(NodeNameTest, AHostnameBecomesAUsableName) {
  EXPECT_EQ(node_name_from_host("gpu-box_3.lab"), "gpu-box_3.lab");
  EXPECT_EQ(node_name_from_host("rack 4/node+7"), "rack-4-node-7");
  EXPECT_EQ(node_name_from_host(std::string(80, 'h')), std::string(64, 'h'));
  EXPECT_EQ(node_name_from_host("h\xc3\xa9te"), "h--te") << "bytes, not letters";
  EXPECT_EQ(node_name_from_host(""), "node");
}

// A process that has exited: its pid and the start time it had.
std::pair<int, uint64_t> dead_process() {
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  uint64_t start = 0;
  for (int i = 0; i < 200 && start == 0; ++i) start = buffer::process_start_time(child);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  return {child, start};
}

TEST(NodeDirTest, TheDirectoriesOfDeadNodesGoAndNothingElse) {
  const std::string base = ::testing::TempDir() + "/node_dir_test_" + std::to_string(getpid());
  std::filesystem::create_directories(base);
  const auto [dead, dead_start] = dead_process();
  ASSERT_NE(dead_start, 0u);
  const uint64_t my_start = buffer::process_start_time(getpid());
  const auto name = [](int pid, uint64_t start, const std::string& tail) {
    return "pronghorn-node-" + std::to_string(pid) + "-" + std::to_string(start) + "-" + tail;
  };
  const std::string gone = base + "/" + name(dead, dead_start, "aB3xYz");
  const std::string reused = base + "/" + name(getpid(), my_start + 1, "Qw12er");  // pid reused
  const std::vector<std::string> kept = {
      base + "/" + name(getpid(), my_start, "LiVe01"),  // a live node's
      base + "/" + name(dead, dead_start, "short"),     // not mkdtemp's six
      base + "/" + name(dead, dead_start, "abc-ef"),    //
      base + "/pronghorn-node-0" + std::to_string(dead) + "-" + std::to_string(dead_start) +
          "-abcdef",                                                 // a leading zero
      base + "/pronghorn-node-" + std::to_string(dead) + "-abcdef",  // no start time
      base + "/pronghorn-nodes-" + std::to_string(dead) + "-1-abcdef",
  };
  std::filesystem::create_directories(gone + "/inside");
  std::ofstream(gone + "/inside/config.toml") << "x";
  std::filesystem::create_directories(reused);
  for (const auto& k : kept) std::filesystem::create_directories(k);
  const std::string file = base + "/" + name(dead, dead_start, "fIle00");  // not a directory
  std::ofstream(file) << "x";
  const std::string link = base + "/" + name(dead, dead_start, "lInk00");  // a link to a directory
  std::filesystem::create_directory_symlink(kept[0], link);

  auto removed = remove_dead_node_dirs(base);
  std::sort(removed.begin(), removed.end());
  std::vector<std::string> expected = {gone, reused};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(removed, expected);
  EXPECT_FALSE(std::filesystem::exists(gone));
  EXPECT_FALSE(std::filesystem::exists(reused));
  for (const auto& k : kept) EXPECT_TRUE(std::filesystem::is_directory(k)) << k;
  EXPECT_TRUE(std::filesystem::is_regular_file(file));
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  std::filesystem::remove_all(base);
}

TEST(NodeDirTest, IsNamedAfterThisProcessAndGoesWithIt) {
  const std::string base = ::testing::TempDir() + "/node_dir_own_" + std::to_string(getpid());
  std::filesystem::create_directories(base);
  std::string path;
  {
    NodeDir dir(base);
    path = dir.path();
    const std::string prefix = base + "/pronghorn-node-" + std::to_string(getpid()) + "-" +
                               std::to_string(buffer::process_start_time(getpid())) + "-";
    EXPECT_TRUE(path.starts_with(prefix)) << path;
    EXPECT_EQ(path.size(), prefix.size() + 6) << path;
    std::ofstream(path + "/config.toml") << "x";
    EXPECT_EQ(remove_dead_node_dirs(base), std::vector<std::string>{}) << "alive: kept";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(base);
}

}  // namespace
}  // namespace pronghorn::remote
