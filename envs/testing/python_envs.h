// For tests of Python-hosted envs: the interpreters they run in, made by the
// project's own setup (tools/setup-test-python: pinned packages, a venv
// outside the repository), and a command's output.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

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

inline void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos)
      << "\"" << message << "\" lacks \"" << part << "\"";
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The users' envs of envs/testing/python importable by every worker started after.
inline void use_test_envs() {
  setenv("PYTHONPATH", PRONGHORN_SOURCE_DIR "/envs/testing/python", 1);
}

inline EnvConfig python_env(const std::string& name, const std::string& python, int64_t k = 4) {
  EnvConfig config;
  config.name = name;
  config.python = python;
  config.num_envs = k;
  return config;
}

// The files mapped into process `pid`: /proc/PID/maps's paths.
inline std::vector<std::string> mapped_files(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::vector<std::string> files;
  for (std::string line; std::getline(maps, line);) {
    if (const size_t slash = line.find('/'); slash != std::string::npos) {
      files.push_back(line.substr(slash));
    }
  }
  return files;
}

// Under CI=true what a test needs must be there: it fails. Elsewhere (a
// machine without that interpreter) it is skipped, saying why.
inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}
#define PRONGHORN_SKIP_UNLESS_CI(why)                                       \
  do {                                                                      \
    if (::pronghorn::envs::testing::in_ci()) FAIL() << why << " (CI=true)"; \
    GTEST_SKIP() << why;                                                    \
  } while (0)

// The first of other_pythons() whose minor version (3.X) `wanted` takes:
// its path and "3.X"; {"", ""} when none.
inline std::pair<std::string, std::string> other_python(
    const std::function<bool(int minor)>& wanted) {
  for (const std::string& python : other_pythons()) {
    const std::string version = python_version(python);
    if (!version.starts_with("3.")) continue;
    if (wanted(std::stoi(version.substr(2)))) return {python, version};
  }
  return {"", ""};
}

}  // namespace pronghorn::envs::testing
