// Config text is bounded before toml++ sees it (core/toml_limits.h): a key of
// 40,000 dotted parts used to overflow the stack of `pronghorn config`.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "core/toml_limits.h"

namespace pronghorn {
namespace {

std::string dotted(int parts) {
  std::string key = "a";
  for (int i = 1; i < parts; ++i) key += ".a";
  return key;
}

// The UsageError message of `f`, or "" when it throws none.
template <typename F>
std::string usage_error_of(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::string& toml, const std::vector<std::string>& overrides = {}) {
  return usage_error_of([&] { parse_config(toml, "test.toml", overrides); });
}

TEST(ConfigLimitsTest, AKeyOfFortyThousandDottedPartsIsAUsageErrorNotACrash) {
  const std::string message = parse_error("[env]\n" + dotted(40000) + " = 1\n");
  EXPECT_EQ(message, "config: test.toml: line 2: a key of 40000 dotted parts; at most 8");
  EXPECT_EQ(parse_error("[" + dotted(40000) + "]\n"),
            "config: test.toml: line 1: a [table] header of 40000 dotted parts; at most 8");
  EXPECT_EQ(parse_error("[[" + dotted(9) + "]]\n"),
            "config: test.toml: line 1: a [table] header of 9 dotted parts; at most 8");
  EXPECT_EQ(parse_error("[env]\nx = { " + dotted(50000) + " = 1 }\n"),
            "config: test.toml: line 2: a key of 50000 dotted parts; at most 8");
}

TEST(ConfigLimitsTest, DeepNestingIsAUsageError) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(parse_error("[model]\nhidden = " + deep + "\n"),
            "config: test.toml: line 2: arrays or inline tables nested 33 deep; at most 32");
  std::string tables;
  for (int i = 0; i < 40; ++i) tables += "{ a = ";
  EXPECT_NE(parse_error("[env]\nx = " + tables + "1" + std::string(40, '}') + "\n")
                .find("nested 33 deep; at most 32"),
            std::string::npos);
}

TEST(ConfigLimitsTest, OverrideValuesAreBoundedToo) {
  const std::string message = parse_error("", {"model.hidden={ " + dotted(20000) + " = 1 }"});
  EXPECT_NE(message.find("config: --set model.hidden={ a.a.a"), std::string::npos) << message;
  EXPECT_NE(message.find("a key of 20000 dotted parts; at most 8"), std::string::npos) << message;
  EXPECT_LT(message.size(), 200u) << "a long override is named by its start";
  EXPECT_NE(parse_error("", {"model.hidden=" + std::string(100, '[')}).find("at most 32"),
            std::string::npos);
  EXPECT_NE(parse_error("", {"model.hidden=[" + std::string(kMaxOverrideBytes, '1') + "]"})
                .find("bytes; at most 65536"),
            std::string::npos);
}

TEST(ConfigLimitsTest, AFileIsReadOnlyUpToItsLimit) {
  EXPECT_EQ(usage_error_of([] { load_config("/dev/zero", {}); }),
            "config: /dev/zero: more than 1048576 bytes; a config file is at most that");
  const std::string path = ::testing::TempDir() + "/config_limits_test.toml";
  std::ofstream(path) << "[env]\n" << dotted(40000) << " = 1\n";
  EXPECT_EQ(usage_error_of([&] { load_config(path, {}); }),
            "config: " + path + ": line 2: a key of 40000 dotted parts; at most 8");
  std::remove(path.c_str());
  EXPECT_NE(usage_error_of([] { load_config(::testing::TempDir(), {}); }).find("cannot"),
            std::string::npos)
      << "a directory";
}

TEST(ConfigLimitsTest, WhatIsNotAKeysDotOrBracketCountsForNothing) {
  // Dots inside quotes, numbers, strings and comments; brackets in strings.
  EXPECT_EQ(
      check_toml_limits("[env] # a.b.c.d.e.f.g.h.i.j\n"
                        "name = \"a.b.c.d.e.f.g.h.i.j [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"\n"
                        "\"a.b.c.d.e.f.g.h.i.j\" = 1\n"
                        "'a.b.c.d.e.f.g.h.i.j' = '''\n[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n'''\n"
                        "x = [1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5,\n"
                        "     1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5]\n"
                        "y = \"\"\"\\\"\"\" a.b.c.d.e.f.g.h.i = 1\"\"\"\n"
                        "z = { a.b = 1.5, c.d = [2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5] }\n"),
      "");
  EXPECT_EQ(check_toml_limits(dotted(8) + " = 1\n"), "");
  EXPECT_EQ(check_toml_limits(dotted(9) + " = 1\n"), "line 1: a key of 9 dotted parts; at most 8");
  EXPECT_EQ(check_toml_limits("a = 1\nb = \"\"\"\n\n\"\"\"\n" + dotted(9) + " = 1\n"),
            "line 5: a key of 9 dotted parts; at most 8")
      << "lines are counted inside multi-line strings";
}

TEST(ConfigLimitsTest, ShippedShapesStillParse) {
  Config c = parse_config("[model]\nhidden = [256, 256, 128]\n[env]\nname = \"pong\"\n",
                          "test.toml", {"model.hidden=[64, 64]", "run.name=\"a.b.c.d.e.f.g.h.i\""});
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(c.run.name, "a.b.c.d.e.f.g.h.i");
}

}  // namespace
}  // namespace pronghorn
