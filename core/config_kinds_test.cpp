// The free-form table kind (core/config_kinds.h), read, written and read
// back; the other kinds are tested through the config's keys
// (config_test.cpp and beside it).
#include "core/config_kinds.h"

#include <gtest/gtest.h>

namespace pronghorn::config_schema {
namespace {

using Options = Kind<OptionTable*>;

// A row for a table `section.options` pointing at `table`.
Field table_row(OptionTable* table) {
  return Field{"section", "options", table, 0, 0, {}, Ranks::kSame, "options"};
}

std::string read_text(OptionTable* table, const std::string& toml_text) {
  const toml::table root = toml::parse(toml_text);
  Unmatched unmatched;
  Field row = table_row(table);
  KindContext ctx{row, unmatched};
  return Options::read(table, *root.get("options"), ctx);
}

TEST(ConfigKindsTest, AFreeFormTableKeepsEachValueWithItsType) {
  OptionTable table;
  ASSERT_EQ(read_text(&table,
                      "[options]\nframeskip = 4\nmode = \"rgb \\\"x\\\"\"\nsticky = 0.25\n"
                      "full_action_space = false\nsizes = [84, 84]\n"),
            "");
  EXPECT_EQ(table, (OptionTable{{"frameskip", "4"},
                                {"mode", "\"rgb \\\"x\\\"\""},
                                {"sticky", "0.25"},
                                {"full_action_space", "false"},
                                {"sizes", "[84, 84]"}}));
  const std::string written = Options::format(&table, table_row(&table));
  EXPECT_EQ(written,
            "{ frameskip = 4, full_action_space = false, mode = \"rgb \\\"x\\\"\", sizes = [84, "
            "84], sticky = 0.25 }");
  OptionTable back;
  ASSERT_EQ(read_text(&back, "options = " + written + "\n"), "");
  EXPECT_EQ(back, table) << "what is written reads back the same";
  EXPECT_EQ(Options::format(&back, table_row(&back)), written);

  OptionTable empty;
  EXPECT_EQ(Options::format(&empty, table_row(&empty)), "{}");
}

TEST(ConfigKindsTest, AFreeFormTableRefusesWhatNoKeywordArgumentCanBe) {
  OptionTable table = {{"kept", "1"}};
  EXPECT_EQ(read_text(&table, "options = 3\n"), "expected a table of options (name = value)");
  EXPECT_EQ(read_text(&table, "[options]\n\"frame-skip\" = 4\n"),
            "option \"frame-skip\": expected a name of letters, digits and _, not starting with "
            "a digit");
  EXPECT_EQ(read_text(&table, "[options]\n\"2x\" = 4\n"),
            "option \"2x\": expected a name of letters, digits and _, not starting with a digit");
  const std::string nested = read_text(&table, "[options.nested]\na = 1\n");
  EXPECT_TRUE(nested.starts_with("option nested = ")) << nested;
  EXPECT_TRUE(nested.ends_with(": expected a string, a number, true or false, or a list of those"))
      << nested;
  EXPECT_NE(read_text(&table, "[options]\nlist = [[1], [2]]\n").find("option list = "),
            std::string::npos);
  EXPECT_EQ(table, (OptionTable{{"kept", "1"}})) << "a refused table changes nothing";
}

TEST(ConfigKindsTest, OneEntryIsSetOrReplacedAlone) {
  OptionTable table = {{"a", "1"}, {"b", "\"x\""}};
  const toml::table root = toml::parse("v = 2.5\n");
  EXPECT_EQ(Options::read_entry(&table, "a", *root.get("v")), "");
  EXPECT_EQ(table, (OptionTable{{"a", "2.5"}, {"b", "\"x\""}}));
  OptionTable full;
  for (size_t i = 0; i < Options::kMaxEntries; ++i) full["o" + std::to_string(i)] = "1";
  EXPECT_EQ(Options::read_entry(&full, "one_more", *root.get("v")),
            "option one_more: at most 256 options");
  EXPECT_EQ(Options::read_entry(&full, "o7", *root.get("v")), "") << "replacing is fine";
}

}  // namespace
}  // namespace pronghorn::config_schema
