// A zygote: a process forked while its parent still had one thread, that
// forks, on request, children running a function of an argument list, so a
// child starts without an exec and without a second start-up of the
// binary's libraries (dynamic linking of LibTorch's hundreds of libraries and
// its operator registration: 0.8 s on 2 cores, paid before main).
//
//   parent (spawn) --args, stderr fd (SCM_RIGHTS)--> zygote --fork--> C --fork--> child
//   parent <--------------- the child's pid ------- zygote (reaps C; the child is the parent's)
//
// The child ends up the parent's own: C exits at once, and the parent is a
// child subreaper (PR_SET_CHILD_SUBREAPER) only while it waits for the reply,
// so the orphaned child is reparented to it before the zygote answers. The
// parent waitpid()s, signals and reads it as any child of its own.
//
// The zygote stays single-threaded and does nothing but fork; it ignores
// SIGINT (Ctrl-C reaches the whole process group: it lives as long as its
// parent) and exits when its socket closes: the parent done, or gone even by
// SIGKILL (the parent's end is close-on-exec and never forked without an
// exec, so no other process holds it). A child gets SIGINT's disposition back
// and runs with the zygote's start-up state: its environment, signal mask,
// working directory and other descriptors those of the parent when the
// zygote was made. Its command line shows `args` (fleet/process_title.h).
//
// Threads: start() only while the calling process has one thread (it
// refuses otherwise); spawn() from any thread, one at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pronghorn::fleet {

class Zygote {
 public:
  // What a child runs; its return value is the child's exit status. args[0]
  // is the program's name. It must not throw.
  using Main = std::function<int(const std::vector<std::string>& args)>;
  static constexpr std::chrono::milliseconds kSpawnTimeout{5000};
  static constexpr size_t kMaxRequestBytes = 64 * 1024;  // the encoded argument list

  // Forks the zygote, which shows `title` as its command line (none: the
  // parent's). Throws pronghorn::Error when it cannot, or when another
  // thread of this process was running at the fork (the zygote could hold
  // a lock of a thread it lacks); libraries whose fork handlers stop their
  // threads (OpenBLAS) are fine.
  static std::unique_ptr<Zygote> start(const Main& main,
                                       const std::vector<std::string>& title = {});
  ~Zygote();  // closes the socket: the zygote exits; reaps it
  Zygote(const Zygote&) = delete;
  Zygote& operator=(const Zygote&) = delete;

  // Forks a child running main(args) with `stderr_fd` as its fd 2 (-1:
  // the zygote's stderr); returns its pid once it is a child of this
  // process. -1 when the zygote is gone, fails or does not answer within
  // `timeout`: it is then killed, failure() says why, and every later
  // spawn() returns -1 at once.
  pid_t spawn(const std::vector<std::string>& args, int stderr_fd,
              std::chrono::milliseconds timeout = kSpawnTimeout);

  pid_t pid() const { return pid_; }
  std::string failure() const;  // "" while it works

 private:
  Zygote(pid_t pid, int socket) : pid_(pid), socket_(socket) {}
  // Kills and reaps the zygote (`gone`: it is exiting; how it ended is
  // added to `why`); returns -1.
  pid_t fail(std::string why, bool gone = false);
  void end(std::chrono::milliseconds grace);  // closes the socket; SIGKILL after `grace`

  mutable std::mutex mutex_;
  pid_t pid_;
  int socket_;           // -1 once ended
  bool reaped_ = false;  // pid_ is no longer ours to signal
  uint64_t sequence_ = 0;
  std::string failure_;
};

}  // namespace pronghorn::fleet
