// The main() of every test binary: GoogleTest's, and the removal of what a
// passing test left in ::testing::TempDir() under a name carrying its process
// id ("control-test-<pid>-Name", "run-dir-test-<pid>", "…-<pid>.err"). ctest
// runs each test in a process of its own, so those names are this test's; a
// failing test's are kept to be read. Without this, every `make test` leaves
// some hundreds of run directories behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace {

// Whether `name` carries "-<pid>" ending there or followed by '-' or '.'.
bool carries_pid(std::string_view name, const std::string& pid) {
  const std::string mark = "-" + pid;
  for (size_t at = name.find(mark); at != std::string_view::npos; at = name.find(mark, at + 1)) {
    const size_t end = at + mark.size();
    if (end == name.size() || name[end] == '-' || name[end] == '.') return true;
  }
  return false;
}

class RemoveWhatPassingTestsLeft : public ::testing::EmptyTestEventListener {
  void OnTestProgramEnd(const ::testing::UnitTest& unit_test) override {
    if (!unit_test.Passed()) return;
    const std::string pid = std::to_string(getpid());
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(::testing::TempDir(), error)) {
      if (carries_pid(entry.path().filename().string(), pid)) {
        std::filesystem::remove_all(entry.path(), error);  // best effort: a leftover is no failure
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveWhatPassingTestsLeft);
  return RUN_ALL_TESTS();
}
