#include "core/logging.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

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

// stderr as log lines and the progress line share it. Every write to
// stderr of this process's lines goes through here, under one mutex.
class Console {
 public:
  static Console& get() {
    static Console console;
    return console;
  }

  bool in_place() const { return in_place_; }

  void show_progress(std::string_view line) {
    std::lock_guard lock(mutex_);
    if (in_place_) {
      progress_.assign(line);
      // \x1b[K clears what a longer earlier line left to the right.
      write("\r" + progress_ + "\x1b[K");
      shown_ = true;
    } else {
      write(std::string(line) + "\n");
    }
  }

  void end_progress() {
    std::lock_guard lock(mutex_);
    if (shown_) write("\n");
    shown_ = false;
    progress_.clear();
  }

  void write_lines(std::string_view text) {
    std::lock_guard lock(mutex_);
    if (!shown_) return write(text);
    write("\r\x1b[K");
    write(text);
    write("\r" + progress_ + "\x1b[K");
  }

 private:
  Console() : in_place_(isatty(STDERR_FILENO) == 1) {}

  // Unbuffered, whole: stderr is shared with the actors' forwarded lines.
  static void write(std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  }

  std::mutex mutex_;
  const bool in_place_;
  bool shown_ = false;    // a progress line is on screen without its newline
  std::string progress_;  // that line, redrawn after a log line
};

// spdlog's stderr sink, through the Console.
class ConsoleSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    Console::get().write_lines(std::string_view(formatted.data(), formatted.size()));
  }
  void flush_() override { std::fflush(stderr); }
};

std::vector<spdlog::sink_ptr>& file_sinks() {
  static std::vector<spdlog::sink_ptr> sinks;
  return sinks;
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
  auto logger =
      std::make_shared<spdlog::logger>(std::string(role), std::make_shared<ConsoleSink>());
  logger->set_pattern(pattern(role));
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

void add_log_file(const std::string& path) {
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
  sink->set_pattern(pattern(current_role()));
  file_sinks().push_back(sink);
  spdlog::default_logger()->sinks().push_back(std::move(sink));
}

void log_to_files_only(std::string_view line, bool error) {
  if (file_sinks().empty()) return;
  spdlog::logger files(current_role(), file_sinks().begin(), file_sinks().end());
  files.set_level(spdlog::level::info);
  files.log(error ? spdlog::level::err : spdlog::level::info, "{}", line);
  files.flush();
}

bool progress_in_place() { return Console::get().in_place(); }
void show_progress(std::string_view line) { Console::get().show_progress(line); }
void end_progress() { Console::get().end_progress(); }
void write_console(std::string_view text) { Console::get().write_lines(text); }

}  // namespace pronghorn
