#include "core/token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"

namespace pronghorn {
namespace {

std::string temp_path(const std::string& name) {
  const std::string path =
      ::testing::TempDir() + "/token-test-" + std::to_string(getpid()) + "-" + name;
  std::filesystem::remove(path);
  return path;
}

TEST(TokenTest, GeneratedTokensAreLongHexAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string t = generate_token();
    ASSERT_EQ(t.size(), 64u);
    ASSERT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(TokenTest, CreatedFileIsPrivateAndReadBackTheSame) {
  const std::string path = temp_path("created");
  const std::string token = read_or_create_token_file(path);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read_token_file(path), token);
  EXPECT_EQ(read_or_create_token_file(path), token) << "an existing file is kept";
}

TEST(TokenTest, ReadTrimsTheFirstLine) {
  const std::string path = temp_path("trim");
  std::ofstream(path) << "  s3cret \r\nsecond line\n";
  EXPECT_EQ(read_token_file(path), "s3cret");
}

TEST(TokenTest, MissingOrEmptyFileIsAnErrorNamingIt) {
  const std::string missing = temp_path("missing");
  try {
    read_token_file(missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const std::string empty = temp_path("empty");
  std::ofstream(empty) << "   \n";
  EXPECT_THROW(read_token_file(empty), Error);
}

TEST(TokenTest, EqualOnlyForTheSameBytes) {
  EXPECT_TRUE(tokens_equal("abc123", "abc123"));
  EXPECT_FALSE(tokens_equal("abc124", "abc123"));
  EXPECT_FALSE(tokens_equal("abc12", "abc123"));
  EXPECT_FALSE(tokens_equal("abc1234", "abc123"));
  EXPECT_FALSE(tokens_equal("", "abc123"));
  EXPECT_FALSE(tokens_equal("", "")) << "an empty expected token never matches";
}

}  // namespace
}  // namespace pronghorn
