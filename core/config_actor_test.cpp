// The [actor] keys that are not plain numbers: actor.count takes "auto" or an
// integer (0 = no local actors), actor.oversubscribe a boolean.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/testing/config_error.h"

namespace pronghorn {
namespace {

using testing::config_error_of;

TEST(ConfigActorTest, CountIsAutoByDefaultAndTakesAutoOrAnIntegerEverywhere) {
  EXPECT_FALSE(load_config("", {}).actor.count.has_value()) << "the default is \"auto\"";
  EXPECT_EQ(parse_config("[actor]\ncount = 3\n", "test.toml", {}).actor.count, 3);
  EXPECT_EQ(parse_config("[actor]\ncount = 0\n", "test.toml", {}).actor.count, 0)
      << "0 means no local actors, not \"auto\"";
  EXPECT_FALSE(parse_config("[actor]\ncount = 3\n", "test.toml", {"actor.count=auto"})
                   .actor.count.has_value());
  EXPECT_FALSE(
      parse_config("[actor]\ncount = \"auto\"\n", "test.toml", {}).actor.count.has_value());
  EXPECT_EQ(parse_config("", "test.toml", {"actor.count=\"auto\"", "actor.count=7"}).actor.count,
            7);
}

TEST(ConfigActorTest, CountRoundTripsThroughTheResolvedToml) {
  for (const char* value : {"auto", "0", "12"}) {
    const Config c = parse_config("", "test.toml", {std::string("actor.count=") + value});
    const std::string text = to_toml(c);
    EXPECT_EQ(parse_config(text, "resolved.toml", {}).actor.count, c.actor.count) << text;
  }
  EXPECT_NE(to_toml(load_config("", {})).find("count = \"auto\""), std::string::npos);
}

TEST(ConfigActorTest, BadCountsNameTheKeyAndWhatItTakes) {
  for (const char* bad :
       {"[actor]\ncount = \"many\"\n", "[actor]\ncount = 2.5\n", "[actor]\ncount = true\n"}) {
    const std::string e = config_error_of(bad);
    EXPECT_NE(e.find("actor.count = "), std::string::npos) << e;
    EXPECT_NE(e.find("expected \"auto\" or an integer"), std::string::npos) << e;
  }
  const std::string e = config_error_of("", {"actor.count=-1"});
  EXPECT_NE(e.find("actor.count = -1: expected \"auto\" or an integer in [0, 1024]"),
            std::string::npos)
      << e;
  EXPECT_NE(config_error_of("", {"actor.count=1025"}).find("in [0, 1024]"), std::string::npos);
}

TEST(ConfigActorTest, NiceIsAutoOrANiceValue) {
  EXPECT_FALSE(load_config("", {}).actor.nice.has_value()) << "\"auto\" by default";
  EXPECT_EQ(parse_config("[actor]\nnice = 7\n", "test.toml", {}).actor.nice, 7);
  EXPECT_FALSE(parse_config("", "test.toml", {"actor.nice=auto"}).actor.nice.has_value());
  EXPECT_NE(config_error_of("", {"actor.nice=20"})
                .find("actor.nice = 20: expected \"auto\" or an integer in [0, 19]"),
            std::string::npos);
  EXPECT_NE(config_error_of("", {"actor.nice=-1"}).find("actor.nice = -1"), std::string::npos)
      << "raising priority is not offered: it needs privileges";
  const std::string text = to_toml(parse_config("", "test.toml", {"actor.nice=3"}));
  EXPECT_EQ(parse_config(text, "resolved.toml", {}).actor.nice, 3) << text;
}

TEST(ConfigActorTest, OversubscribeIsABooleanAndTheWatchdogKeysHaveRanges) {
  EXPECT_FALSE(load_config("", {}).actor.oversubscribe);
  EXPECT_TRUE(parse_config("", "test.toml", {"actor.oversubscribe=true"}).actor.oversubscribe);
  const std::string e = config_error_of("[actor]\noversubscribe = 1\n");
  EXPECT_NE(e.find("actor.oversubscribe = 1: expected true or false"), std::string::npos) << e;
  const Config defaults = load_config("", {});
  EXPECT_EQ(defaults.actor.max_crashes, 5);
  EXPECT_EQ(defaults.actor.stall_timeout_s, 60.0);
  EXPECT_NE(config_error_of("", {"actor.max_crashes=-1"}).find("actor.max_crashes = -1"),
            std::string::npos);
  EXPECT_NE(config_error_of("", {"actor.stall_timeout_s=-5"}).find("actor.stall_timeout_s = -5"),
            std::string::npos);
  const std::string text = to_toml(parse_config("", "test.toml", {"actor.oversubscribe=true"}));
  EXPECT_TRUE(parse_config(text, "resolved.toml", {}).actor.oversubscribe) << text;
}

}  // namespace
}  // namespace pronghorn
