// One actor's stderr as its learner sees it: a pipe the actor writes its
// fd 2 into, read without blocking from the learner's loop; every complete
// line goes on to the learner's stderr unchanged, and the last one is kept,
// so an actor that exits on an error ("pronghorn: env plugin … step failed:
// reward NaN") can be named in the line that ends the job.
// Threads: one caller (the supervisor, on the learner's loop).
#pragma once

#include <string>

namespace pronghorn::fleet {

class ActorOutput {
 public:
  ActorOutput();  // a new pipe; both ends close on exec
  ~ActorOutput();
  ActorOutput(ActorOutput&& other) noexcept;
  ActorOutput& operator=(ActorOutput&& other) noexcept;
  ActorOutput(const ActorOutput&) = delete;
  ActorOutput& operator=(const ActorOutput&) = delete;

  // The end the child gets as its fd 2 (posix_spawn_file_actions_adddup2,
  // or sent to the zygote, which dup2()s it in the child: fleet/zygote.h);
  // close it here once the child is started, so the pipe ends with the child.
  int child_end() const { return write_fd_; }
  void close_child_end();

  // Forwards the complete lines waiting in the pipe; never blocks.
  void drain();
  // After the child is reaped: everything it wrote, its last line included
  // even without a newline.
  void finish();

  const std::string& last_line() const { return last_line_; }

 private:
  void forward(std::string_view line);
  void close_all();

  int read_fd_ = -1, write_fd_ = -1;
  std::string partial_;    // bytes of a line not yet ended
  std::string last_line_;  // the last line forwarded, without its newline
};

}  // namespace pronghorn::fleet
