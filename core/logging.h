// Logging: spdlog, set up once per process by main (docs/architecture.md §4).
//
// Every line carries a timestamp, the process role and its pid, so the lines
// of a learner and its actors read well when interleaved:
//   2026-11-22 03:40:01.123 learner[4121] info: ring ready, 16 slots
// Code logs with spdlog::info(...) and friends; one line per event, nothing
// per step in hot loops.
//
// stderr also carries the learner's progress line (learner/reporting.h). On
// a terminal it is rewritten in place with \r; a log line (or an actor's
// forwarded line) clears it first and redraws it after itself, so the two
// never share a line. Elsewhere (a pipe, a file, Slurm, nohup) every
// progress line is a plain line of its own.
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

// Writes `line` to the log files only (train.log), not to stderr: the
// result line a command also prints on stdout (an error line: main prints it).
void log_to_files_only(std::string_view line, bool error = false);

// Whether the progress line is rewritten in place: stderr is a terminal.
bool progress_in_place();

// Shows `line` (no newline in it) as the progress line: in place on a
// terminal, else as a plain line.
void show_progress(std::string_view line);

// Ends the progress line shown in place (a newline after it), so that what
// follows starts on a line of its own. Does nothing when none is shown.
void end_progress();

// Writes `text` (complete lines) to stderr the way a log line is written:
// the progress line cleared before and redrawn after.
void write_console(std::string_view text);

}  // namespace pronghorn
