// The zygote in a test binary of its own (no thread of another test may
// exist when it forks): its children are this process's, write through the
// pipe they were given and end with the status their function returned; many
// in a row; the start-up state they run with; no zygote beside a running
// thread; a dead or stopped zygote fails a spawn within its deadline; a
// zygote whose parent is killed is gone.
#include "fleet/zygote.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace pronghorn::fleet {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// What the children run, by args[1]:
//   say TEXT CODE  TEXT on stderr, exit CODE
//   args ...       every argument on stderr, '|' between them
//   state          SIGINT's and SIGPIPE's dispositions, $ZYGOTE_TEST, the command line
//   watch PID      exits once its parent is no longer PID (as actors watch their learner)
int child_main(const std::vector<std::string>& args) {
  std::string out;
  int code = 0;
  if (args.at(1) == "say") {
    out = args.at(2) + "\n";
    code = std::stoi(args.at(3));
  } else if (args[1] == "args") {
    for (const std::string& a : args) out += a + "|";
    out.back() = '\n';
  } else if (args[1] == "state") {
    struct sigaction sigint {
    }, sigpipe{};
    sigaction(SIGINT, nullptr, &sigint);
    sigaction(SIGPIPE, nullptr, &sigpipe);
    const char* env = std::getenv("ZYGOTE_TEST");
    std::ifstream in("/proc/self/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    out = std::string("int=") + (sigint.sa_handler == SIG_DFL ? "default" : "changed") +
          " pipe=" + (sigpipe.sa_handler == SIG_IGN ? "ignored" : "not ignored") +
          " env=" + (env ? env : "unset") + " cmdline=" + cmdline + "\n";
  } else if (args[1] == "watch") {
    const pid_t parent = std::stoi(args.at(2));
    for (int i = 0; i < 3000 && getppid() == parent; ++i) usleep(10'000);
  }
  if (!out.empty() && write(STDERR_FILENO, out.data(), out.size()) < 0) return 99;
  return code;
}

struct Pipe {
  int read = -1, write = -1;
  Pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) == 0) read = fds[0], write = fds[1];
  }
  ~Pipe() {
    close_write();
    if (read >= 0) ::close(read);
  }
  void close_write() {
    if (write >= 0) ::close(write);
    write = -1;
  }
  // Everything until the writers are gone, or what came by the deadline.
  std::string drain(Clock::duration timeout = 10s) {
    close_write();
    const auto deadline = Clock::now() + timeout;
    std::string text;
    char buffer[4096];
    while (Clock::now() < deadline) {
      pollfd p{read, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(read, buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<size_t>(n));
    }
    return text;
  }
};

// The exit status of our child `pid`, or -1 if it has not ended by the deadline.
int exit_status(pid_t pid, Clock::duration timeout = 10s) {
  const auto deadline = Clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) return -1;
    std::this_thread::sleep_for(1ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string stat_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

pid_t parent_of(pid_t pid) {
  const std::string stat = stat_of(pid);
  const size_t end = stat.rfind(')');
  if (end == std::string::npos) return -1;
  char state = 0;
  pid_t parent = -1;
  sscanf(stat.c_str() + end + 1, " %c %d", &state, &parent);
  return parent;
}

// No such process, or only its zombie (nobody here can reap an orphan).
bool gone(pid_t pid) {
  const std::string stat = stat_of(pid);
  const size_t end = stat.rfind(')');
  return end == std::string::npos || stat.substr(end + 2, 1) == "Z";
}

bool wait_until_gone(pid_t pid, Clock::duration timeout = 10s) {
  const auto deadline = Clock::now() + timeout;
  while (!gone(pid)) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

std::string cmdline_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

TEST(ZygoteTest, TheChildIsOursWritesThroughItsPipeAndEndsWithItsFunctionsValue) {
  const auto zygote = Zygote::start(child_main, {"zygote_test", "zygote"});
  EXPECT_EQ(parent_of(zygote->pid()), getpid());
  // Its title is set by the zygote itself, as soon as it runs.
  const auto deadline = Clock::now() + 10s;
  while (cmdline_of(zygote->pid()) != "zygote_test zygote" && Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(cmdline_of(zygote->pid()), "zygote_test zygote");
  Pipe pipe;
  const pid_t pid = zygote->spawn({"child", "say", "hello from the child", "7"}, pipe.write);
  ASSERT_GT(pid, 0) << zygote->failure();
  EXPECT_EQ(parent_of(pid), getpid()) << "already this process's child when the pid comes back";
  EXPECT_EQ(pipe.drain(), "hello from the child\n");
  EXPECT_EQ(exit_status(pid), 7);
  EXPECT_EQ(zygote->failure(), "");
}

TEST(ZygoteTest, ArgumentsArriveWholeEmptyLongAndWithSpaces) {
  const auto zygote = Zygote::start(child_main);
  const std::string long_arg(20000, 'x');
  Pipe pipe;
  const pid_t pid = zygote->spawn({"child", "args", "", "a b", long_arg}, pipe.write);
  ASSERT_GT(pid, 0) << zygote->failure();
  EXPECT_EQ(pipe.drain(), "child|args||a b|" + long_arg + "\n");
  EXPECT_EQ(exit_status(pid), 0);
}

TEST(ZygoteTest, ManySpawnsInARowEachWithItsPipeAndStatus) {
  const auto zygote = Zygote::start(child_main);
  constexpr int kChildren = 100;
  std::vector<Pipe> pipes(kChildren);
  std::vector<pid_t> pids;
  for (int i = 0; i < kChildren; ++i) {
    pids.push_back(zygote->spawn({"child", "say", "child " + std::to_string(i), std::to_string(i)},
                                 pipes[i].write));
    ASSERT_GT(pids.back(), 0) << "spawn " << i << ": " << zygote->failure();
    pipes[i].close_write();
  }
  EXPECT_EQ(std::set<pid_t>(pids.begin(), pids.end()).size(), pids.size());
  for (int i = 0; i < kChildren; ++i) {
    EXPECT_EQ(pipes[i].drain(), "child " + std::to_string(i) + "\n");
    EXPECT_EQ(exit_status(pids[i]), i);
  }
}

TEST(ZygoteTest, ChildrenRunWithTheStartUpStateNeitherTheZygotesNorTheParentsLater) {
  setenv("ZYGOTE_TEST", "at start", 1);
  std::signal(SIGPIPE, SIG_IGN);  // as pronghorn's main sets it first
  const auto zygote = Zygote::start(child_main, {"zygote_test", "zygote"});
  setenv("ZYGOTE_TEST", "later", 1);
  std::signal(SIGPIPE, SIG_DFL);
  Pipe pipe;
  const pid_t pid = zygote->spawn({"child", "state"}, pipe.write);
  ASSERT_GT(pid, 0) << zygote->failure();
  // SIGINT: ignored by the zygote, given back; the command line: the child's own.
  EXPECT_EQ(pipe.drain(), "int=default pipe=ignored env=at start cmdline=child state\n");
  EXPECT_EQ(exit_status(pid), 0);
  // A command line longer than the parent's arguments: one line, over the environment's area.
  Pipe long_pipe;
  const std::string long_arg(300, 'y');
  const pid_t long_pid = zygote->spawn({"child", "state", long_arg}, long_pipe.write);
  ASSERT_GT(long_pid, 0) << zygote->failure();
  const std::string text = long_pipe.drain();
  EXPECT_NE(text.find("cmdline=child state yyy"), std::string::npos) << text;
  EXPECT_EQ(exit_status(long_pid), 0);
  unsetenv("ZYGOTE_TEST");
}

TEST(ZygoteTest, ItRefusesToStartWhileAnotherThreadRuns) {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::thread other([&] {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return done; });
  });
  try {
    Zygote::start(child_main);
    ADD_FAILURE() << "started beside a running thread";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "2 threads were running when the zygote was forked; it would hold any lock they "
                 "held");
  }
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  cv.notify_all();
  other.join();
  // Joined is not yet gone from /proc/self/task: the next test starts a zygote.
  const auto deadline = Clock::now() + 10s;
  while (std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                       std::filesystem::directory_iterator()) > 1 &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
}

TEST(ZygoteTest, ADeadZygoteFailsTheSpawnAtOnceAndEveryOneAfter) {
  const auto zygote = Zygote::start(child_main);
  ASSERT_EQ(kill(zygote->pid(), SIGKILL), 0);
  const auto start = Clock::now();
  Pipe pipe;
  EXPECT_EQ(zygote->spawn({"child", "say", "never", "0"}, pipe.write), -1);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(zygote->failure(), "the zygote is gone (it was killed by SIGKILL)");
  EXPECT_EQ(zygote->spawn({"child", "say", "never", "0"}, pipe.write), -1);
  EXPECT_EQ(pipe.drain(1s), "");
  EXPECT_TRUE(gone(zygote->pid()));
}

TEST(ZygoteTest, AZygoteThatDoesNotAnswerFailsTheSpawnAtItsDeadlineAndIsKilled) {
  const auto zygote = Zygote::start(child_main);
  ASSERT_EQ(kill(zygote->pid(), SIGSTOP), 0);
  const auto start = Clock::now();
  EXPECT_EQ(zygote->spawn({"child", "say", "never", "0"}, -1, 300ms), -1);
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(zygote->failure(), "the zygote did not answer within 300 ms");
  EXPECT_TRUE(gone(zygote->pid()));
  EXPECT_EQ(waitpid(zygote->pid(), nullptr, WNOHANG), -1) << "reaped already";
}

TEST(ZygoteTest, AZygoteWhoseParentIsKilledIsGoneAndItsChildrenCanTell) {
  Pipe report;  // the parent's zygote pid and child pid
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {  // single-threaded: this test binary starts no thread
    try {
      const auto zygote = Zygote::start(child_main);
      const pid_t child = zygote->spawn({"child", "watch", std::to_string(getpid())}, -1);
      const pid_t pids[2] = {zygote->pid(), child};
      if (write(report.write, pids, sizeof pids) != sizeof pids) _exit(1);
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  report.close_write();
  pid_t pids[2] = {-1, -1};
  pollfd p{report.read, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  ASSERT_EQ(read(report.read, pids, sizeof pids), static_cast<ssize_t>(sizeof pids));
  ASSERT_GT(pids[1], 0);
  EXPECT_EQ(parent_of(pids[1]), parent);
  ASSERT_EQ(kill(parent, SIGKILL), 0);
  EXPECT_EQ(exit_status(parent), 128 + SIGKILL);
  EXPECT_TRUE(wait_until_gone(pids[0])) << "the zygote outlived its parent";
  EXPECT_TRUE(wait_until_gone(pids[1])) << "the child did not see its parent go";
  if (!gone(pids[1])) kill(pids[1], SIGKILL);  // whatever failed above, nothing is left running
}

}  // namespace
}  // namespace pronghorn::fleet
