#include "tools/exit_record.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "core/files.h"

namespace pronghorn::cli {

namespace {
std::string record_path(const std::string& dir) { return dir + "/exit_status"; }
}  // namespace

std::string read_exit_record(const std::string& dir) {
  std::string line;
  std::ifstream in(record_path(dir));
  std::getline(in, line);
  return line;
}

void ExitRecord::claim(const std::string& dir) {
  path_ = record_path(dir);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void ExitRecord::record(int code, std::string_view reason) const noexcept {
  // A job that never ran removes the directory it made: nothing to record in.
  if (path_.empty() || !std::filesystem::is_directory(std::filesystem::path(path_).parent_path()))
    return;
  try {
    // One line: a multi-line reason keeps only its first.
    const std::string_view line = reason.substr(0, reason.find('\n'));
    write_file_atomically(path_, fmt::format("{} {}\n", code, line));
  } catch (const std::exception& e) {
    spdlog::error("{}: cannot record how this rank ended ({})", path_, e.what());
  }
}

}  // namespace pronghorn::cli
