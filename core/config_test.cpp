#include "core/config.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/testing/config_error.h"

namespace pronghorn {
namespace {

using testing::config_error_of;
using testing::expect_names;

TEST(ConfigTest, DefaultsTrainCartPole) {
  Config c = load_config("", {});
  EXPECT_EQ(c.env.name, "cartpole");
  EXPECT_EQ(c.loss.kind, LossConfig::Kind::kImpala);
  EXPECT_EQ(c.learner.batch_size, 2);
  EXPECT_FALSE(c.run.target_return.has_value());  // "auto": the env's own, 475 for CartPole
  EXPECT_EQ(c.run.eval_interval_s, 30.0);
  EXPECT_EQ(c.run.eval_episodes, 10);
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{64, 64}));
}

TEST(ConfigTest, TargetReturnIsAutoOrANumber) {
  EXPECT_EQ(load_config("", {"run.target_return=-250"}).run.target_return, -250.0);
  EXPECT_EQ(load_config("", {"run.target_return=0"}).run.target_return, 0.0);
  EXPECT_FALSE(load_config("", {"run.target_return=7", "run.target_return=auto"})
                   .run.target_return.has_value());
  const Config c = parse_config("[run]\ntarget_return = \"auto\"\n", "test.toml", {});
  EXPECT_FALSE(c.run.target_return.has_value());
  EXPECT_NE(to_toml(c).find("target_return = \"auto\""), std::string::npos) << to_toml(c);
  expect_names(config_error_of("[run]\ntarget_return = \"high\"\n"),
               {"run.target_return", "expected \"auto\" or a number"});
}

TEST(ConfigTest, FileValuesReplaceDefaults) {
  Config c = parse_config(R"(
    [env]
    num_envs = 64
    [learner]
    learning_rate = 3      # an integer is accepted where a number is expected
    optimizer = "rmsprop"
    [model]
    hidden = [128, 32, 8]
  )",
                          "test.toml", {});
  EXPECT_EQ(c.env.num_envs, 64);
  EXPECT_DOUBLE_EQ(c.learner.learning_rate, 3.0);
  EXPECT_EQ(c.learner.optimizer, LearnerConfig::Optimizer::kRmsprop);
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{128, 32, 8}));
  EXPECT_EQ(c.actor.unroll_length, 16) << "untouched keys keep their defaults";
}

TEST(ConfigTest, OverridesWinOverTheFileInOrder) {
  Config c = parse_config("[env]\nnum_envs = 64\n", "test.toml",
                          {"env.num_envs=8", "env.num_envs=16", "env.name=pong",
                           "run.name=\"quoted\"", "model.hidden=[5]", "loss.discount=0.5"});
  EXPECT_EQ(c.env.num_envs, 16);
  EXPECT_EQ(c.env.name, "pong");
  EXPECT_EQ(c.run.name, "quoted");
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{5}));
  EXPECT_DOUBLE_EQ(c.loss.discount, 0.5);
}

TEST(ConfigTest, BareOverrideOfAStringKeepsItsText) {
  Config c = load_config("", {"run.name=2026", "env.plugin=./lib my env.so"});
  EXPECT_EQ(c.run.name, "2026");
  EXPECT_EQ(c.env.plugin, "./lib my env.so");
}

TEST(ConfigTest, UnknownSectionSuggestsTheClosestOne) {
  expect_names(config_error_of("[enviroment]\nnum_envs = 3\n"),
               {"test.toml", "unknown section [enviroment]", "did you mean env?"});
}

TEST(ConfigTest, UnknownKeySuggestsTheClosestOne) {
  expect_names(config_error_of("[learner]\nbatch_sise = 3\n"),
               {"test.toml", "unknown key learner.batch_sise", "did you mean learner.batch_size?"});
  expect_names(config_error_of("", {"env.numenvs=3"}),
               {"--set env.numenvs=3", "unknown key env.numenvs", "did you mean env.num_envs?"});
}

// An abbreviation of a key's words ("lr": learning rate) says more than a
// key that merely starts with it (lr_schedule).
TEST(ConfigTest, AnAbbreviationSuggestsTheKeyItAbbreviatesFirst) {
  expect_names(config_error_of("", {"learner.lr=0.001"}),
               {"unknown key learner.lr", "did you mean learner.learning_rate?"});
  expect_names(config_error_of("", {"learner.bs=8"}),
               {"unknown key learner.bs", "did you mean learner.batch_size?"});
  expect_names(config_error_of("", {"learner.lr_sched=\"linear\""}),
               {"unknown key learner.lr_sched", "did you mean learner.lr_schedule?"});
}

TEST(ConfigTest, UnknownKeyFarFromAnyGetsNoSuggestion) {
  std::string message = config_error_of("[run]\nzzzzzzzzzzzz = 1\n");
  expect_names(message, {"unknown key run.zzzzzzzzzzzz"});
  EXPECT_EQ(message.find("did you mean"), std::string::npos) << message;
}

TEST(ConfigTest, TopLevelKeyIsRejected) {
  expect_names(config_error_of("num_envs = 3\n"), {"num_envs = 3", "[section]"});
}

TEST(ConfigTest, WrongTypeNamesKeyValueAndExpectedType) {
  expect_names(config_error_of("[env]\nnum_envs = 2.5\n"),
               {"env.num_envs = 2.5", "expected an integer"});
  expect_names(config_error_of("[env]\nname = 3\n"), {"env.name = 3", "expected a string"});
  expect_names(config_error_of("[loss]\ndiscount = \"high\"\n"),
               {"loss.discount = \"high\"", "expected a number"});
  expect_names(config_error_of("[model]\nhidden = [64, \"x\"]\n"),
               {"model.hidden", "expected a list of integers"});
  expect_names(config_error_of("", {"actor.count=many"}),
               {"--set actor.count=many", "actor.count = many", "expected \"auto\" or an integer"});
}

TEST(ConfigTest, OutOfRangeNamesKeyValueAndRange) {
  expect_names(config_error_of("[env]\nnum_envs = 0\n"), {"env.num_envs = 0", "in [1, "});
  expect_names(config_error_of("", {"loss.discount=1.5"}),
               {"loss.discount = 1.5", "in [0.0, 1.0]"});
  expect_names(config_error_of("", {"model.hidden=[64, 0]"}),
               {"model.hidden = [64, 0]", "every item"});
  expect_names(config_error_of("", {"server.metrics_port=70000"}),
               {"server.metrics_port = 70000", "65535"});
  expect_names(config_error_of("", {"server.metrics_address=localhost"}),
               {"server.metrics_address = \"localhost\"", "IPv4", "0.0.0.0"});
}

TEST(ConfigTest, EpisodeInfoIsAListOfPlainNames) {
  Config c = parse_config("[env]\nepisode_info = [\"score\", \"episode/r\"]\n", "test.toml", {});
  EXPECT_EQ(c.env.episode_info, (std::vector<std::string>{"score", "episode/r"}));
  const std::string text = to_toml(c);
  EXPECT_NE(text.find("episode_info = [\"score\", \"episode/r\"]"), std::string::npos) << text;
  EXPECT_EQ(parse_config(text, "printed", {}).env.episode_info, c.env.episode_info);
  EXPECT_EQ(parse_config("", "test.toml", {"env.episode_info=[\"lives\"]"}).env.episode_info,
            std::vector<std::string>{"lives"});
  EXPECT_TRUE(parse_config("", "test.toml", {}).env.episode_info.empty());
  expect_names(config_error_of("[env]\nepisode_info = [1]\n"),
               {"env.episode_info", "expected a list of names"});
  expect_names(config_error_of("[env]\nepisode_info = \"score\"\n"),
               {"env.episode_info", "expected a list of names"});
  expect_names(config_error_of("[env]\nepisode_info = [\"a b\"]\n"),
               {"env.episode_info", "letters, digits and _ . / -", "(not \"a b\")"});
  for (const char* bad : {"a//b", "/a", "a/"}) {
    expect_names(config_error_of(fmt::format("[env]\nepisode_info = [\"{}\"]\n", bad)),
                 {"env.episode_info", "no empty part between slashes"});
  }
  expect_names(config_error_of("[env]\nepisode_info = [\"a\", \"a\"]\n"),
               {"env.episode_info", "\"a\" is named twice"});
  std::string many = "[env]\nepisode_info = [";
  for (int i = 0; i < 17; ++i) many += fmt::format("{}\"k{}\"", i ? ", " : "", i);
  expect_names(config_error_of(many + "]\n"), {"env.episode_info", "at most 16 names"});
}

TEST(ConfigTest, UnknownChoiceListsTheChoices) {
  expect_names(config_error_of("", {"loss.kind=ppx"}),
               {"loss.kind = \"ppx\"", "impala, ppo", "did you mean ppo?"});
  expect_names(config_error_of("", {"learner.device=tpu"}), {"learner.device", "auto, cpu, cuda"});
  expect_names(config_error_of("", {"model.core=gru"}), {"model.core = \"gru\"", "none, lstm"});
}

TEST(ConfigTest, TheRecurrentCoreIsOffUnlessAsked) {
  EXPECT_EQ(Config{}.model.core, ModelConfig::Core::kNone);
  Config c = parse_config("[model]\ncore = \"lstm\"\ncore_hidden = 32\n", "test.toml", {});
  EXPECT_EQ(c.model.core, ModelConfig::Core::kLstm);
  EXPECT_EQ(c.model.core_hidden, 32);
  expect_names(config_error_of("", {"model.core_hidden=0"}), {"model.core_hidden = 0", "in [1, "});
}

TEST(ConfigTest, ChoicesAreEnumsReadAndPrintedAsTheirWords) {
  Config c =
      parse_config("[learner]\noptimizer = \"nadam\"\n[model]\nactivation = 'relu'\n", "test.toml",
                   {"learner.optimizer=rmsprop", "loss.kind=\"ppo\"", "loss.advantages=gae",
                    "model.kind=impala_cnn", "learner.device=cpu", "model.fast_path=off"});
  EXPECT_EQ(c.learner.optimizer, LearnerConfig::Optimizer::kRmsprop)
      << "a later source replaces a word that named no choice";
  EXPECT_EQ(c.loss.kind, LossConfig::Kind::kPpo);
  EXPECT_EQ(c.loss.advantages, LossConfig::Advantages::kGae);
  EXPECT_EQ(c.model.kind, ModelConfig::Kind::kImpalaCnn);
  EXPECT_EQ(c.model.activation, ModelConfig::Activation::kRelu);
  EXPECT_EQ(c.model.fast_path, ModelConfig::FastPath::kOff);
  EXPECT_EQ(c.learner.device, LearnerConfig::Device::kCpu);
  EXPECT_EQ(to_string(c.model.kind), "impala_cnn");
  EXPECT_EQ(to_string(LearnerConfig::LrSchedule::kConstant), "constant");
  const std::string text = to_toml(c);
  EXPECT_NE(text.find("optimizer = \"rmsprop\""), std::string::npos) << text;
  EXPECT_NE(text.find("kind = \"impala_cnn\""), std::string::npos) << text;
  EXPECT_EQ(to_toml(parse_config(text, "printed", {})), text);
}

TEST(ConfigTest, UnknownChoiceIsRefusedInTableOrderWithOtherRanges) {
  expect_names(config_error_of("", {"loss.kind=ppx", "env.num_envs=0"}), {"env.num_envs = 0"});
  expect_names(config_error_of("[learner]\noptimizer = 1\n"),
               {"learner.optimizer = 1", "expected a string"});
  Config c;
  c.learner.device = static_cast<LearnerConfig::Device>(7);
  EXPECT_THROW(validate(c), UsageError);
}

// learner.minibatches splits the batch's B·K columns: it must divide them.
TEST(ConfigTest, MinibatchesThatDoNotDivideTheBatchAreRefusedNamingTheKeys) {
  expect_names(config_error_of("", {"learner.minibatches=3"}),
               {"learner.minibatches = 3", "learner.batch_size", "env.num_envs", "= 64"});
  expect_names(config_error_of("", {"learner.minibatches=0"}), {"learner.minibatches = 0"});
  expect_names(config_error_of("", {"learner.epochs=0"}), {"learner.epochs = 0"});
  const Config c =
      parse_config("", "test.toml",
                   {"learner.epochs=4", "learner.minibatches=8", "loss.normalize_advantages=true"});
  EXPECT_EQ(c.learner.epochs, 4);
  EXPECT_EQ(c.learner.minibatches, 8);
  EXPECT_TRUE(c.loss.normalize_advantages);
  const Config defaults = load_config("", {});
  EXPECT_EQ(defaults.learner.epochs, 1);
  EXPECT_EQ(defaults.learner.minibatches, 1);
  EXPECT_FALSE(defaults.loss.normalize_advantages);
  EXPECT_EQ(defaults.loss.advantage_stats, LossConfig::AdvantageStats::kMinibatch);
  EXPECT_EQ(parse_config("", "test.toml", {"loss.advantage_stats=batch"}).loss.advantage_stats,
            LossConfig::AdvantageStats::kBatch);
  expect_names(config_error_of("", {"loss.advantage_stats=epoch"}),
               {"loss.advantage_stats", "\"epoch\"", "minibatch, batch"});
}

// learner.shuffle = "steps" splits the batch's T·B·K steps: PPO on GAE and a
// feed-forward model only, and minibatches must divide the steps.
TEST(ConfigTest, ShuffledStepsNeedGaeAFeedForwardModelAndMinibatchesThatDivideTheSteps) {
  const std::vector<std::string> ppo = {"learner.shuffle=steps", "loss.kind=ppo",
                                        "loss.advantages=gae"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), ppo.begin(), ppo.end());
    return more;
  };
  // 2 unrolls × 32 envs × 16 steps = 1024 steps: 3 minibatches do not
  // divide them; 256 (more than the 64 columns) do.
  const Config c = parse_config("", "test.toml", with({"learner.minibatches=256"}));
  EXPECT_EQ(c.learner.shuffle, LearnerConfig::Shuffle::kSteps);
  EXPECT_EQ(load_config("", {}).learner.shuffle, LearnerConfig::Shuffle::kColumns);
  expect_names(config_error_of("", with({"learner.minibatches=3"})),
               {"learner.minibatches = 3", "actor.unroll_length", "= 1024"});
  expect_names(config_error_of("", {"learner.shuffle=steps", "loss.kind=ppo"}),
               {"learner.shuffle = \"steps\"", "loss.advantages", "\"vtrace\""});
  expect_names(config_error_of("", {"learner.shuffle=steps"}),
               {"learner.shuffle = \"steps\"", "loss.kind", "\"impala\""});
  expect_names(config_error_of("", with({"model.core=lstm"})),
               {"learner.shuffle = \"steps\"", "model.core", "\"lstm\""});
  expect_names(config_error_of("", {"learner.shuffle=rows"}), {"learner.shuffle"});
}

TEST(ConfigTest, InconsistentCombinationsNameBothKeys) {
  expect_names(config_error_of("", {"learner.batch_size=32", "learner.ring_slots=16"}),
               {"learner.batch_size = 32", "learner.ring_slots = 16"});
  expect_names(config_error_of("", {"loss.advantages=gae"}), {"loss.advantages", "loss.kind"});
  expect_names(config_error_of("", {"loss.value_clip=0.2"}),
               {"loss.value_clip = 0.2", "loss.kind = \"ppo\""});
  expect_names(config_error_of("", {"distributed.batch_wait_ms=3000", "distributed.timeout_s=3"}),
               {"distributed.batch_wait_ms = 3000", "distributed.timeout_s = 3"});
  expect_names(config_error_of("", {"server.tls_cert=cert.pem"}),
               {"server.tls_cert", "server.tls_key"});
  expect_names(config_error_of("", {"server.address=localhost"}),
               {"server.address = \"localhost\"", "HOST:PORT"});
  expect_names(config_error_of("", {"server.address=127.0.0.1:99999"}), {"server.address"});
  expect_names(config_error_of("", {"run.name=../escape"}), {"run.name = \"../escape\""});
  expect_names(config_error_of("", {"server.address=0.0.0.0:7453"}),
               {"server.address = \"0.0.0.0:7453\"", "server.token_file"});
}

// env.splits overlaps a Python env's worker processes with the actor: a
// built-in or plugin env has none to overlap, and each split takes every
// worker.
TEST(ConfigTest, SplitsNeedAPythonEnvAndEvenSplits) {
  const std::string gym = "env.name=gymnasium:CartPole-v1";
  EXPECT_EQ(load_config("", {gym, "env.splits=2"}).env.splits, 2);
  EXPECT_NO_THROW(load_config("", {gym, "env.splits=2", "env.workers=16", "env.num_envs=32"}));
  expect_names(config_error_of("", {"env.splits=2"}), {"env.splits = 2", "built-in or plugin env"});
  expect_names(config_error_of("", {gym, "env.splits=2", "env.plugin=libenv.so"}),
               {"env.splits = 2", "built-in or plugin env"});
  expect_names(config_error_of("", {gym, "env.splits=3"}),
               {"env.splits = 3", "env.num_envs = 32", "env.workers = 1"});
  expect_names(config_error_of("", {gym, "env.splits=2", "env.workers=17"}),
               {"env.splits = 2", "env.num_envs = 32", "env.workers = 17"});
}

TEST(ConfigTest, NonLoopbackServerNeedsATokenFile) {
  EXPECT_NO_THROW(load_config("", {"server.address=0.0.0.0:7453", "server.token_file=t"}));
  EXPECT_NO_THROW(load_config("", {"server.address=127.0.0.1:0"}));
  EXPECT_NO_THROW(load_config("", {"server.address=[::1]:7453"}));
  EXPECT_TRUE(is_loopback_address("localhost:1"));
  EXPECT_TRUE(is_loopback_address("127.0.0.2:1"));
  EXPECT_TRUE(is_loopback_address("[::1]:1"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0:1"));
  EXPECT_FALSE(is_loopback_address("[::]:1"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1:1"));
  EXPECT_FALSE(is_loopback_address("127.example.com:1"));
}

TEST(ConfigTest, MalformedOverrideSaysWhatItExpects) {
  expect_names(config_error_of("", {"batch_size"}), {"--set batch_size", "section.key=value"});
  expect_names(config_error_of("", {"learner=3"}), {"--set learner=3", "section.key=value"});
  expect_names(config_error_of("", {"model.hidden=[1,"}), {"model.hidden", "written as in TOML"});
}

TEST(ConfigTest, SyntaxErrorGivesFileLineAndColumn) {
  expect_names(config_error_of("[env]\nnum_envs = = 3\n"), {"test.toml:2:"});
}

TEST(ConfigTest, MissingFileIsAUsageError) {
  try {
    load_config("/nonexistent/pronghorn.toml", {});
    FAIL() << "expected an error";
  } catch (const UsageError& e) {
    expect_names(e.what(), {"/nonexistent/pronghorn.toml"});
  }
}

TEST(ConfigTest, PrintedConfigReadsBackEqual) {
  Config original = load_config(
      "", {"env.plugin=./a \"quoted\" path\\x.so", "learner.learning_rate=0.000123456789",
           "loss.entropy_cost=1e-7", "run.target_return=-5", "model.hidden=[7, 9]",
           "run.total_steps=123456789012", "run.report_interval_s=2"});
  std::string text = to_toml(original);
  Config again = parse_config(text, "printed", {});
  EXPECT_EQ(to_toml(again), text);
  EXPECT_EQ(again.env.plugin, original.env.plugin);
  EXPECT_EQ(again.learner.learning_rate, original.learner.learning_rate);  // exact round trip
  EXPECT_EQ(again.loss.entropy_cost, original.loss.entropy_cost);
  EXPECT_EQ(again.run.total_steps, 123456789012);
  EXPECT_EQ(again.model.hidden, original.model.hidden);
}

TEST(ConfigTest, LoadsAFileFromDisk) {
  std::string path = ::testing::TempDir() + "/pronghorn_config_test.toml";
  std::ofstream(path) << "[actor]\nunroll_length = 20\n";
  EXPECT_EQ(load_config(path, {}).actor.unroll_length, 20);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pronghorn
