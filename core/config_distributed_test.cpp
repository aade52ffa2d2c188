// The [distributed] keys: "auto" or an integer for world_size and rank, a
// HOST:PORT rendezvous, the backend choice, the deadlines, and the checks that
// span them (rank inside the world, port 0 only on rank 0).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/config_schema.h"
#include "core/error.h"
#include "core/testing/config_error.h"

namespace pronghorn {
namespace {

using testing::config_error_of;
using testing::expect_names;

TEST(ConfigDistributedTest, DefaultsAreASingleLearnerUnlessTheEnvironmentSaysOtherwise) {
  const DistributedConfig d = load_config("", {}).distributed;
  EXPECT_FALSE(d.world_size.has_value()) << "\"auto\": from the environment, else 1";
  EXPECT_FALSE(d.rank.has_value());
  EXPECT_EQ(d.rendezvous, "");
  EXPECT_EQ(d.backend, DistributedConfig::Backend::kAuto);
  EXPECT_EQ(d.interface, "");
  EXPECT_EQ(d.timeout_s, 60.0);
  EXPECT_EQ(d.rendezvous_timeout_s, 300.0);
  EXPECT_EQ(d.check_interval_steps, 100);
  EXPECT_EQ(d.batch_wait_ms, 50);
}

TEST(ConfigDistributedTest, EveryKeyIsReadFromAFileAndFromOverrides) {
  const DistributedConfig d = parse_config(R"(
    [distributed]
    world_size = 3
    rank = 2
    rendezvous = "node1:29500"
    backend = "gloo"
    interface = "eth1"
    timeout_s = 5
    rendezvous_timeout_s = 12.5
    check_interval_steps = 0
    batch_wait_ms = 250
  )",
                                           "test.toml", {})
                                  .distributed;
  EXPECT_EQ(d.world_size, 3);
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(d.rendezvous, "node1:29500");
  EXPECT_EQ(d.backend, DistributedConfig::Backend::kGloo);
  EXPECT_EQ(d.interface, "eth1");
  EXPECT_EQ(d.timeout_s, 5.0);
  EXPECT_EQ(d.rendezvous_timeout_s, 12.5);
  EXPECT_EQ(d.check_interval_steps, 0);
  EXPECT_EQ(d.batch_wait_ms, 250);

  const DistributedConfig o =
      load_config("", {"distributed.world_size=2", "distributed.rank=auto",
                       "distributed.rendezvous=[::1]:0", "distributed.backend=nccl"})
          .distributed;
  EXPECT_EQ(o.world_size, 2);
  EXPECT_FALSE(o.rank.has_value());
  EXPECT_EQ(o.rendezvous, "[::1]:0");
  EXPECT_EQ(o.backend, DistributedConfig::Backend::kNccl);
}

TEST(ConfigDistributedTest, AutoIsAcceptedQuotedOrBareAndResetsAnEarlierNumber) {
  const Config c = parse_config("[distributed]\nworld_size = 4\nrank = 1\n", "test.toml",
                                {"distributed.world_size=auto", "distributed.rank=\"auto\""});
  EXPECT_FALSE(c.distributed.world_size.has_value());
  EXPECT_FALSE(c.distributed.rank.has_value());
  EXPECT_FALSE(parse_config("[distributed]\nworld_size = \"auto\"\n", "test.toml", {})
                   .distributed.world_size.has_value());
}

TEST(ConfigDistributedTest, OutOfRangeValuesNameTheKeyAndTheRange) {
  expect_names(config_error_of("", {"distributed.world_size=0"}),
               {"distributed.world_size = 0", "\"auto\" or an integer in [1, 4096]"});
  expect_names(config_error_of("", {"distributed.world_size=4097"}),
               {"distributed.world_size = 4097", "[1, 4096]"});
  expect_names(config_error_of("", {"distributed.rank=-1"}),
               {"distributed.rank = -1", "[0, 4095]"});
  expect_names(config_error_of("", {"distributed.timeout_s=0"}),
               {"distributed.timeout_s = 0", "[0.1, 86400"});
  expect_names(config_error_of("", {"distributed.rendezvous_timeout_s=100000"}),
               {"distributed.rendezvous_timeout_s = 100000", "86400"});
  expect_names(config_error_of("", {"distributed.check_interval_steps=-1"}),
               {"distributed.check_interval_steps = -1"});
  expect_names(config_error_of("", {"distributed.batch_wait_ms=60001"}),
               {"distributed.batch_wait_ms = 60001", "[0, 60000]"});
}

TEST(ConfigDistributedTest, WrongTypesAndUnknownChoicesNameTheKey) {
  expect_names(config_error_of("[distributed]\nrank = \"first\"\n"),
               {"distributed.rank = \"first\"", "expected \"auto\" or an integer"});
  expect_names(config_error_of("[distributed]\nworld_size = 2.5\n"),
               {"distributed.world_size = 2.5"});
  expect_names(config_error_of("[distributed]\nrendezvous = 29500\n"),
               {"distributed.rendezvous = 29500", "expected a string"});
  expect_names(config_error_of("", {"distributed.backend=mpi"}),
               {"distributed.backend = \"mpi\"", "auto, gloo, nccl"});
}

TEST(ConfigDistributedTest, RankMustBeInsideTheWorld) {
  expect_names(config_error_of("", {"distributed.world_size=2", "distributed.rank=2"}),
               {"distributed.rank = 2", "distributed.world_size = 2"});
  EXPECT_EQ(config_error_of("", {"distributed.world_size=2", "distributed.rank=1"}), "");
  EXPECT_EQ(config_error_of("", {"distributed.rank=7"}), "")
      << "the world size may still come from the environment";
}

TEST(ConfigDistributedTest, MalformedRendezvousIsRefusedNamingTheKey) {
  for (const char* bad : {"node1", "node1:", ":29500", "node1:65536", "node1:-1", "node1:29x",
                          "::1:29500", "[::1]", "[]:29500", "no de:1", "node1:123456"}) {
    expect_names(config_error_of("", {std::string("distributed.rendezvous=") + bad}),
                 {"distributed.rendezvous = \"", "HOST:PORT"});
  }
  for (const char* good :
       {"node1:29500", "10.0.0.1:1", "[::1]:29500", "[fe80::1%eth0]:65535", "a.b.example:0", ""}) {
    EXPECT_EQ(config_error_of("", {std::string("distributed.rendezvous=") + good}), "") << good;
  }
}

TEST(ConfigDistributedTest, PortZeroIsForRankZeroOnly) {
  EXPECT_EQ(config_error_of("", {"distributed.rendezvous=node1:0", "distributed.rank=0"}), "");
  EXPECT_EQ(config_error_of("", {"distributed.rendezvous=node1:0"}), "")
      << "the rank may come from the environment; placement checks it then";
  expect_names(config_error_of("", {"distributed.rendezvous=node1:0", "distributed.rank=1"}),
               {"distributed.rendezvous = \"node1:0\"", "rank 0 only", "distributed.rank = 1"});
}

TEST(ConfigDistributedTest, InterfaceMustBeAnInterfaceName) {
  EXPECT_EQ(config_error_of("", {"distributed.interface=enp65s0f1np1"}), "");
  for (const char* bad : {"eth 0", "a/b", "averyveryverylongname", "eth0:1"}) {
    expect_names(config_error_of("", {std::string("distributed.interface=") + bad}),
                 {"distributed.interface = \"", "interface name"});
  }
}

TEST(ConfigDistributedTest, EveryKeyRoundTripsThroughTheResolvedToml) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"distributed.world_size=4", "distributed.rank=3", "distributed.rendezvous=[::1]:29500",
       "distributed.backend=nccl", "distributed.interface=ib0", "distributed.timeout_s=0.25",
       "distributed.rendezvous_timeout_s=86400", "distributed.check_interval_steps=0",
       "distributed.batch_wait_ms=0"},
      {"distributed.timeout_s=86400", "distributed.batch_wait_ms=60000"},
      {"distributed.world_size=auto", "distributed.rank=0", "distributed.backend=gloo"},
  };
  for (const auto& overrides : cases) {
    const Config c = load_config("", overrides);
    const std::string text = to_toml(c);
    const Config again = parse_config(text, "resolved.toml", {});
    EXPECT_EQ(to_toml(again), text);
    const DistributedConfig& a = again.distributed;
    const DistributedConfig& d = c.distributed;
    EXPECT_EQ(a.world_size, d.world_size) << text;
    EXPECT_EQ(a.rank, d.rank) << text;
    EXPECT_EQ(a.rendezvous, d.rendezvous) << text;
    EXPECT_EQ(a.backend, d.backend) << text;
    EXPECT_EQ(a.interface, d.interface) << text;
    EXPECT_EQ(a.timeout_s, d.timeout_s) << text;
    EXPECT_EQ(a.rendezvous_timeout_s, d.rendezvous_timeout_s) << text;
    EXPECT_EQ(a.check_interval_steps, d.check_interval_steps) << text;
    EXPECT_EQ(a.batch_wait_ms, d.batch_wait_ms) << text;
  }
  const std::string defaults = to_toml(load_config("", {}));
  EXPECT_NE(defaults.find("[distributed]\nworld_size = \"auto\""), std::string::npos) << defaults;
  EXPECT_GT(defaults.find("[distributed]"), defaults.find("[server]")) << "after [server]";
}

TEST(ConfigDistributedTest, HostPortSplitsIPv6HostsOutOfTheirBrackets) {
  const auto v6 = parse_host_port("[::1]:29500");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 29500);
  const auto named = parse_host_port("node-7.cluster:0");
  ASSERT_TRUE(named.has_value());
  EXPECT_EQ(named->host, "node-7.cluster");
  EXPECT_EQ(named->port, 0);
  EXPECT_FALSE(parse_host_port("node:65536").has_value());
  EXPECT_FALSE(parse_host_port("::1:80").has_value());
}

}  // namespace
// The keys the ranks of one job may set differently come from the table's
// Ranks column: where a rank stands, its node's actors and threads, its own
// directory, seed and servers; everything else must agree at the rendezvous.
TEST(ConfigDistributedTest, TheKeysRanksMaySetDifferentlyAreTheTablesPerRankRows) {
  using config_schema::may_differ_per_rank;
  for (const char* key : {"distributed.rank", "distributed.world_size", "distributed.rendezvous",
                          "distributed.interface", "distributed.backend", "actor.count",
                          "actor.nice", "learner.threads", "run.dir", "run.seed", "server.address",
                          "server.token_file", "remote.address", "remote.credits"}) {
    EXPECT_TRUE(may_differ_per_rank(key)) << key;
  }
  for (const char* key : {"env.name", "learner.batch_size", "learner.learning_rate", "model.hidden",
                          "run.name", "distributed.timeout_s", "no.such"}) {
    EXPECT_FALSE(may_differ_per_rank(key)) << key;
  }
}

}  // namespace pronghorn
