#include "core/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "core/error.h"

namespace pronghorn {
namespace {

std::string pattern(std::string_view role) {
  // %P is the pid; %l the level name.
  return "%Y-%m-%d %H:%M:%S.%e " + std::string(role) + "[%P] %l: %v";
}

std::string& current_role() {
  static std::string role = "pronghorn";
  return role;
}

}  // namespace

void init_logging(std::string_view role, std::string_view level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  // from_str maps anything unknown to "off"; only the word "off" may mean off.
  if (parsed == spdlog::level::off && level != "off") {
    throw UsageError("--log-level " + std::string(level) + ": expected one of " +
                     std::string(kLogLevels));
  }
  current_role() = role;
  auto logger = std::make_shared<spdlog::logger>(std::string(role),
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern(pattern(role));
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

void add_log_file(const std::string& path) {
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
  sink->set_pattern(pattern(current_role()));
  spdlog::default_logger()->sinks().push_back(std::move(sink));
}

}  // namespace pronghorn
