// Logging: spdlog, set up once per process by main (docs/architecture.md §4).
//
// Every line carries a timestamp, the process role and its pid, so the lines
// of a learner and its actors read well when interleaved:
//   2026-11-22 03:40:01.123 learner[4121] info: ring ready, 16 slots
// Code logs with spdlog::info(...) and friends; one line per event, nothing
// per step in hot loops.
#pragma once

#include <string>
#include <string_view>

namespace pronghorn {

// The levels --log-level accepts, most verbose first.
inline constexpr std::string_view kLogLevels = "trace, debug, info, warn, error, off";

// Replaces the default logger with one writing to stderr. `level` is one of
// kLogLevels; anything else throws UsageError. Call from main, before threads.
void init_logging(std::string_view role, std::string_view level);

// Also writes every line to `path` (appending), e.g. a run's train.log.
void add_log_file(const std::string& path);

}  // namespace pronghorn
