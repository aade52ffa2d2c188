// Placement: rank, world size, rank 0's address and node name from the config
// and each launcher's environment, the precedence between them, Slurm's
// hostlists, and a refusal naming the variable for every bad value. The
// environment is a map handed in through the GetEnv seam.
#include "distributed/placement.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/testing/error_of.h"

namespace pronghorn::distributed {
namespace {

using Variables = std::map<std::string, std::string>;

GetEnv environment(const Variables& variables) {
  return [variables](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

Placement place(const Variables& variables, const DistributedConfig& config = {},
                const std::string& name_flag = "") {
  return resolve_placement(config, environment(variables), name_flag);
}

std::string refusal(const Variables& variables, const DistributedConfig& config = {}) {
  return testing::error_of<UsageError>([&] { place(variables, config); });
}

// Asserts that `message` is one line and holds every one of `parts`.
void expect_names(const std::string& message, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(message.empty()) << "expected a UsageError";
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

const Variables kTorchrun = {
    {"RANK", "1"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "trainer-0"}, {"MASTER_PORT", "29500"}};
const Variables kSlurm = {{"SLURM_PROCID", "2"},
                          {"SLURM_NTASKS", "3"},
                          {"SLURM_JOB_NODELIST", "gpu[003-005]"},
                          {"SLURM_JOB_ID", "123456"},
                          {"SLURMD_NODENAME", "gpu005"}};
const Variables kIndexedJob = {{"JOB_COMPLETION_INDEX", "2"},
                               {"WORLD_SIZE", "3"},
                               {"MASTER_ADDR", "job-0.svc"},
                               {"MASTER_PORT", "29400"}};

Variables merged(std::initializer_list<Variables> sets) {
  Variables all;
  for (const Variables& set : sets) all.insert(set.begin(), set.end());
  return all;
}

TEST(PlacementTest, NothingAnywhereIsASingleLearner) {
  const Placement p = place({});
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.host, "");
  EXPECT_EQ(p.port, 0);
  EXPECT_EQ(p.source, "single learner");
  EXPECT_FALSE(p.node_name.empty());
  EXPECT_EQ(p.node_name_source, "hostname");
}

TEST(PlacementTest, ConfigAloneGivesEverything) {
  DistributedConfig c;
  c.world_size = 2;
  c.rank = 1;
  c.rendezvous = "[fd00::1]:29500";
  const Placement p = place({}, c);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_EQ(p.host, "fd00::1");
  EXPECT_EQ(p.port, 29500);
  EXPECT_EQ(p.source, "config");
}

TEST(PlacementTest, TorchrunAndKubeflowVariables) {
  const Placement p = place(kTorchrun);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.host, "trainer-0");
  EXPECT_EQ(p.port, 29500);
  EXPECT_EQ(p.source, "torchrun/Kubeflow (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
}

TEST(PlacementTest, SlurmTakesTheFirstNodeAndDerivesThePortFromTheJobId) {
  const Placement p = place(kSlurm);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.world_size, 3);
  EXPECT_EQ(p.host, "gpu003") << "zero padding kept";
  EXPECT_EQ(p.port, kSlurmPortBase + 123456 % kSlurmPortSpan);
  EXPECT_EQ(p.port, 23456);
  EXPECT_EQ(p.source, "Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST, SLURM_JOB_ID)");
  EXPECT_EQ(p.node_name, "gpu005");
  EXPECT_EQ(p.node_name_source, "SLURMD_NODENAME");
}

TEST(PlacementTest, SlurmPrefersMasterPortAndMasterAddrWhenSet) {
  Variables v = kSlurm;
  v["MASTER_PORT"] = "31000";
  Placement p = place(v);
  EXPECT_EQ(p.host, "gpu003");
  EXPECT_EQ(p.port, 31000);
  EXPECT_EQ(p.source, "Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST, MASTER_PORT)");
  v["MASTER_ADDR"] = "10.1.2.3";
  p = place(v);
  EXPECT_EQ(p.host, "10.1.2.3");
  EXPECT_EQ(p.port, 31000);
}

TEST(PlacementTest, IndexedJobTakesTheRankFromTheCompletionIndex) {
  const Placement p = place(kIndexedJob);
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.world_size, 3);
  EXPECT_EQ(p.host, "job-0.svc");
  EXPECT_EQ(p.port, 29400);
  EXPECT_EQ(p.source,
            "Kubernetes Indexed Job (JOB_COMPLETION_INDEX, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
}

TEST(PlacementTest, IndexedJobTakesWorldSizeAndAddressFromTheConfig) {
  DistributedConfig c;
  c.world_size = 4;
  c.rendezvous = "job-0.svc:29400";
  const Placement p = place({{"JOB_COMPLETION_INDEX", "3"}}, c);
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.host, "job-0.svc");
  EXPECT_EQ(p.source,
            "config (distributed.world_size, distributed.rendezvous) and Kubernetes Indexed Job "
            "(JOB_COMPLETION_INDEX)");
}

TEST(PlacementTest, ConfigWinsKeyByKeyOverTheEnvironment) {
  DistributedConfig c;
  c.rank = 3;
  Placement p = place(kTorchrun, c);
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(p.host, "trainer-0");
  EXPECT_EQ(p.source,
            "config (distributed.rank) and torchrun/Kubeflow (WORLD_SIZE, MASTER_ADDR, "
            "MASTER_PORT)");
  c.rendezvous = "elsewhere:1234";
  p = place(kTorchrun, c);
  EXPECT_EQ(p.host, "elsewhere");
  EXPECT_EQ(p.port, 1234);
  EXPECT_EQ(p.world_size, 4);
  c.world_size = 8;
  EXPECT_EQ(place(kTorchrun, c).world_size, 8);
  EXPECT_EQ(place(kTorchrun, c).source, "config");
}

TEST(PlacementTest, TorchrunWinsOverSlurmWhichWinsOverAnIndexedJob) {
  Placement p = place(merged({kTorchrun, kSlurm, kIndexedJob}));
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_NE(p.source.find("torchrun/Kubeflow"), std::string::npos) << p.source;

  p = place(merged({kSlurm, {{"JOB_COMPLETION_INDEX", "0"}}}));
  EXPECT_EQ(p.rank, 2) << "SLURM_PROCID, not JOB_COMPLETION_INDEX";
  EXPECT_EQ(p.world_size, 3);
  EXPECT_NE(p.source.find("Slurm"), std::string::npos) << p.source;
}

TEST(PlacementTest, WorldSizeOneInTheConfigIgnoresTheEnvironment) {
  DistributedConfig c;
  c.world_size = 1;
  const Placement p = place(merged({kSlurm, kIndexedJob}), c);
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.source, "config");
}

TEST(PlacementTest, AOneTaskLaunchNeedsNoAddress) {
  const Placement p =
      place({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "n[1-"}});
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.host, "") << "the nodelist is not read when there is no one to meet";
  EXPECT_EQ(p.source, "Slurm (SLURM_PROCID, SLURM_NTASKS)");
}

TEST(PlacementTest, EmptyVariablesCountAsUnset) {
  const Placement p = place({{"RANK", ""}, {"WORLD_SIZE", ""}, {"SLURMD_NODENAME", ""}});
  EXPECT_EQ(p.world_size, 1);
  EXPECT_EQ(p.source, "single learner");
  EXPECT_EQ(p.node_name_source, "hostname");
}

TEST(PlacementTest, NodeNameIsTheFlagThenSlurmThenTheHostname) {
  Placement p = place(kSlurm, {}, "left-rack");
  EXPECT_EQ(p.node_name, "left-rack");
  EXPECT_EQ(p.node_name_source, "--name");
  p = place(kSlurm);
  EXPECT_EQ(p.node_name, "gpu005");
  p = place({});
  EXPECT_EQ(p.node_name_source, "hostname");
}

TEST(PlacementTest, AWorldWithoutAnAddressNamesWhereToSetIt) {
  expect_names(refusal({{"RANK", "1"}, {"WORLD_SIZE", "2"}}),
               {"distributed: world_size 2 but no rank 0 address: set distributed.rendezvous or "
                "MASTER_ADDR and MASTER_PORT"});
  expect_names(refusal({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "n1"}}),
               {"no rank 0 address", "MASTER_PORT is unset"});
  expect_names(refusal({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "7"}}),
               {"no rank 0 address", "SLURM_JOB_NODELIST"});
  DistributedConfig c;
  c.world_size = 2;
  c.rank = 0;
  expect_names(refusal({}, c), {"world_size 2 but no rank 0 address"});
}

TEST(PlacementTest, AWorldWithoutARankIsRefused) {
  DistributedConfig c;
  c.world_size = 2;
  expect_names(refusal({}, c), {"world_size 2", "no rank", "distributed.rank or RANK"});
  expect_names(refusal({{"WORLD_SIZE", "3"}}), {"world_size 3 (from WORLD_SIZE)", "no rank"});
}

TEST(PlacementTest, BadNumbersNameTheVariableAndItsValue) {
  const std::vector<std::pair<Variables, std::string>> cases = {
      {merged({{{"RANK", "abc"}}, kTorchrun}), "RANK = \"abc\""},
      {merged({{{"RANK", "-1"}}, kTorchrun}), "RANK = \"-1\""},
      {merged({{{"RANK", "4096"}}, kTorchrun}), "RANK = \"4096\""},
      {merged({{{"WORLD_SIZE", "0"}}, kTorchrun}), "WORLD_SIZE = \"0\""},
      {merged({{{"WORLD_SIZE", "2x"}}, kTorchrun}), "WORLD_SIZE = \"2x\""},
      {merged({{{"MASTER_PORT", "65536"}}, kTorchrun}), "MASTER_PORT = \"65536\""},
      {merged({{{"MASTER_PORT", " 80"}}, kTorchrun}), "MASTER_PORT = \" 80\""},
      {merged({{{"MASTER_ADDR", "a b"}}, kTorchrun}), "MASTER_ADDR = \"a b\""},
      {merged({{{"SLURM_PROCID", "x"}}, kSlurm}), "SLURM_PROCID = \"x\""},
      {merged({{{"SLURM_NTASKS", "-3"}}, kSlurm}), "SLURM_NTASKS = \"-3\""},
      {merged({{{"SLURM_JOB_ID", "12a"}}, kSlurm}), "SLURM_JOB_ID = \"12a\""},
      {merged({{{"SLURM_JOB_NODELIST", "gpu[3-1]"}}, kSlurm}), "SLURM_JOB_NODELIST = \"gpu[3-1]\""},
      {merged({{{"JOB_COMPLETION_INDEX", "1.5"}}, kIndexedJob}), "JOB_COMPLETION_INDEX = \"1.5\""},
  };
  for (const auto& [variables, named] : cases) {
    const std::string message = refusal(variables);
    expect_names(message, {"distributed: ", named});
  }
}

TEST(PlacementTest, RankOutsideTheWorldNamesBothSources) {
  expect_names(refusal(merged({{{"RANK", "4"}}, kTorchrun})),
               {"rank 4 (from RANK)", "world_size 4 (WORLD_SIZE)"});
  expect_names(refusal(merged({{{"SLURM_PROCID", "3"}}, kSlurm})),
               {"rank 3 (from SLURM_PROCID)", "world_size 3 (SLURM_NTASKS)"});
  expect_names(refusal({{"JOB_COMPLETION_INDEX", "2"}}),
               {"rank 2 (from JOB_COMPLETION_INDEX)", "world_size 1",
                "set distributed.world_size or WORLD_SIZE"});
  DistributedConfig c;
  c.world_size = 2;
  c.rank = 2;
  expect_names(refusal({}, c), {"rank 2 (from distributed.rank)", "distributed.world_size"});
}

TEST(PlacementTest, PortZeroIsForRankZeroOnly) {
  Variables v = kTorchrun;
  v["MASTER_PORT"] = "0";
  expect_names(refusal(v), {"MASTER_PORT = \"0\"", "rank 0 only", "rank 1"});
  v["RANK"] = "0";
  EXPECT_EQ(place(v).port, 0);
  DistributedConfig c;
  c.rendezvous = "n1:0";
  expect_names(refusal(kTorchrun, c), {"distributed.rendezvous = \"n1:0\"", "rank 0 only"});
}

TEST(PlacementTest, DescribeIsOneLineNamingEverySource) {
  Variables v = kSlurm;
  v["SLURM_PROCID"] = "1";
  EXPECT_EQ(describe(place(v)),
            "rank 1 of 3, rank 0 at gpu003:23456 (from Slurm (SLURM_PROCID, SLURM_NTASKS, "
            "SLURM_JOB_NODELIST, SLURM_JOB_ID)), node gpu005 (SLURMD_NODENAME)");
  EXPECT_EQ(describe(place({}, {}, "n0")), "rank 0 of 1 (single learner), node n0 (--name)");
  DistributedConfig c;
  c.world_size = 2;
  c.rank = 0;
  c.rendezvous = "[::1]:0";
  EXPECT_EQ(describe(place({}, c, "n0")),
            "rank 0 of 2, rank 0 at [::1]:0 (from config), node n0 "
            "(--name)");
}

TEST(HostlistTest, ExpandsSlurmsCompressedForms) {
  using V = std::vector<std::string>;
  EXPECT_EQ(expand_hostlist("node7", 100), V({"node7"}));
  EXPECT_EQ(expand_hostlist("a,b", 100), V({"a", "b"}));
  EXPECT_EQ(expand_hostlist("n[1-2,5]", 100), V({"n1", "n2", "n5"}));
  EXPECT_EQ(expand_hostlist("gpu[003-004]", 100), V({"gpu003", "gpu004"}));
  EXPECT_EQ(expand_hostlist("n[8-10]", 100), V({"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[098-101]", 100), V({"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("rack1-n[01-02]", 100), V({"rack1-n01", "rack1-n02"}));
  EXPECT_EQ(expand_hostlist("r[1-2]n[1-2]", 100), V({"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(expand_hostlist("n[1-2]-ib", 100), V({"n1-ib", "n2-ib"}));
  EXPECT_EQ(expand_hostlist("gpu[1,3],cpu[01-02],login", 100),
            V({"gpu1", "gpu3", "cpu01", "cpu02", "login"}));
}

TEST(HostlistTest, StopsAtTheLimitWithoutExpandingHugeRanges) {
  EXPECT_EQ(expand_hostlist("n[1-999999999999]", 2), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(expand_hostlist("a[1-3],b", 1), (std::vector<std::string>{"a1"}));
}

TEST(HostlistTest, MalformedListsNameTheVariableAndText) {
  for (const char* bad : {"", "n[1-", "n]1[", "n[1-2", "n[]", "n[a-b]", "n[2-1]", "n[1-2,]", "a,,b",
                          "a,", ",a", "n[[1]]", "n[1]]", "a b", "n[-1]", "n[1--2]"}) {
    const std::string message =
        testing::error_of<UsageError>([&] { expand_hostlist(bad, 100, "SLURM_JOB_NODELIST"); });
    expect_names(message, {"SLURM_JOB_NODELIST = \"" + std::string(bad) + "\"", "hostlist"});
  }
}

}  // namespace
}  // namespace pronghorn::distributed
