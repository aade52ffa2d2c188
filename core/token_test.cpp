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
  std::string path = ::testing::TempDir() + "/token-test-" + std::to_string(getpid()) + "-" + name;
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
  chmod(path.c_str(), 0600);
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
  chmod(empty.c_str(), 0600);
  EXPECT_THROW(read_token_file(empty), Error);
}

TEST(TokenTest, ExplicitFileOpenToOtherUsersIsRefused) {
  const std::string path = temp_path("open");
  std::ofstream(path) << "s3cret\n";
  chmod(path.c_str(), 0644);
  try {
    read_token_file(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("other users may read or write it (mode 644)"),
              std::string::npos)
        << e.what();
  }
  chmod(path.c_str(), 0640);  // a group-readable secret is the user's choice
  EXPECT_EQ(read_token_file(path), "s3cret");
}

TEST(TokenTest, RunDirectoryTokenMustBeThisUsersAndPrivate) {
  const std::string path = temp_path("planted");
  std::ofstream(path) << "planted\n";
  chmod(path.c_str(), 0640);
  EXPECT_THROW(read_or_create_token_file(path), Error) << "not private";
  chmod(path.c_str(), 0600);
  EXPECT_EQ(read_or_create_token_file(path), "planted");
  if (geteuid() == 0) {
    ASSERT_EQ(chown(path.c_str(), 65534, 65534), 0);
    try {
      read_or_create_token_file(path);
      FAIL() << "another user's token file was adopted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("owned by uid 65534"), std::string::npos) << e.what();
    }
  }
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
