#include "fleet/actor_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/logging.h"

namespace pronghorn::fleet {
namespace {

// A line longer than this is forwarded in pieces (an actor printing a
// megabyte without a newline must not grow the learner's memory).
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

ActorOutput::ActorOutput() {
  int fds[2];
  PRONGHORN_CHECK(pipe2(fds, O_CLOEXEC) == 0,
                  "cannot create a pipe for an actor's stderr: ", std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  // Only our end is non-blocking: an actor writing to a full pipe waits for
  // the next drain() rather than losing its line.
  fcntl(read_fd_, F_SETFL, fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
}

ActorOutput::~ActorOutput() { close_all(); }

ActorOutput::ActorOutput(ActorOutput&& other) noexcept
    : read_fd_(std::exchange(other.read_fd_, -1)),
      write_fd_(std::exchange(other.write_fd_, -1)),
      partial_(std::move(other.partial_)),
      last_line_(std::move(other.last_line_)) {}

ActorOutput& ActorOutput::operator=(ActorOutput&& other) noexcept {
  if (this != &other) {
    close_all();
    read_fd_ = std::exchange(other.read_fd_, -1);
    write_fd_ = std::exchange(other.write_fd_, -1);
    partial_ = std::move(other.partial_);
    last_line_ = std::move(other.last_line_);
  }
  return *this;
}

void ActorOutput::close_all() {
  if (read_fd_ >= 0) ::close(read_fd_);
  close_child_end();
  read_fd_ = -1;
}

void ActorOutput::close_child_end() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
}

void ActorOutput::forward(std::string_view line) {
  std::string out(line);
  out += '\n';
  write_console(out);                    // never glued onto the learner's progress line
  if (!line.empty()) last_line_ = line;  // a blank line says nothing about an error
}

void ActorOutput::drain() {
  char buffer[4096];
  while (read_fd_ >= 0) {
    const ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nothing more now (EAGAIN), or the child's end is closed (0)
    partial_.append(buffer, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
      forward(std::string_view(partial_).substr(start, end - start));
    }
    partial_.erase(0, start);
    if (partial_.size() > kMaxLine) {
      forward(partial_);
      partial_.clear();
    }
  }
}

void ActorOutput::finish() {
  drain();  // the child is gone: the pipe holds all it wrote, then end of file
  if (!partial_.empty()) forward(partial_);
  partial_.clear();
}

}  // namespace pronghorn::fleet
