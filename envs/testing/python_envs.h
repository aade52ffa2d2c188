// For tests of Python-hosted envs: the interpreters they run in, made by the
// project's own setup (tools/setup-test-python: pinned packages, a venv
// outside the repository), and a command's output.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace pronghorn::envs::testing {

// `command`'s stdout (its stderr goes to the test's), and its exit status.
struct CommandOutput {
  std::string out;
  int status = -1;
};
inline CommandOutput run_command(const std::string& command) {
  CommandOutput result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> data{};
  size_t n = 0;
  while ((n = fread(data.data(), 1, data.size(), pipe)) > 0) result.out.append(data.data(), n);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

inline std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

// The venv's python that tools/setup-test-python makes with `flags`
// ("" = Debian's python3 with Gymnasium and Box2D; see the script), made
// once per test process. A failure to make it fails the test: never a skip.
inline std::string test_python(const std::string& flags = "") {
  const CommandOutput made =
      run_command(std::string(PRONGHORN_SOURCE_DIR) + "/tools/setup-test-python " + flags);
  EXPECT_EQ(made.status, 0) << "tools/setup-test-python " << flags << " failed";
  return last_line(made.out);
}

// "3.11" for `python`; "" when it does not run.
inline std::string python_version(const std::string& python) {
  const CommandOutput v =
      run_command(python + " -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])' 2>/dev/null");
  return v.status == 0 ? last_line(v.out) : "";
}

// CPython interpreters on this machine besides Debian's: pythonX.Y on PATH,
// and pyenv's builds. Each as a path.
inline std::vector<std::string> other_pythons() {
  std::vector<std::string> found;
  for (int minor = 6; minor <= 14; ++minor) {
    const CommandOutput which =
        run_command("command -v python3." + std::to_string(minor) + " 2>/dev/null");
    if (which.status == 0) found.push_back(last_line(which.out));
  }
  const char* root = std::getenv("PYENV_ROOT");
  const char* home = std::getenv("HOME");
  const std::filesystem::path versions = root != nullptr ? std::filesystem::path(root) / "versions"
                                         : home != nullptr
                                             ? std::filesystem::path(home) / ".pyenv/versions"
                                             : std::filesystem::path();
  std::error_code ec;
  if (!versions.empty() && std::filesystem::is_directory(versions, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(versions, ec)) {
      const auto python = entry.path() / "bin/python3";
      if (std::filesystem::exists(python, ec)) found.push_back(python.string());
    }
  }
  return found;
}

}  // namespace pronghorn::envs::testing
