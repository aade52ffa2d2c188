#include "tools/video_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "core/error.h"

extern char** environ;

namespace pronghorn::cli {
namespace {

bool yuv_container(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".mp4" || ext == ".mkv" || ext == ".mov";
}

}  // namespace

VideoWriter::VideoWriter(std::string path, int64_t width, int64_t height, int scale, int fps)
    : path_(std::move(path)), frame_bytes_(width * height * 3) {
  std::string log_template =
      (std::filesystem::temp_directory_path() / "pronghorn-ffmpeg-XXXXXX").string();
  const int log = mkostemp(log_template.data(), O_CLOEXEC);
  PRONGHORN_CHECK(log >= 0,
                  "--video: cannot make a file for ffmpeg's messages: ", std::strerror(errno));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    const int err = errno;
    close(log);
    std::remove(log_template.c_str());
    throw Error(fmt::format("--video: pipe: {}", std::strerror(err)));
  }
  // Scaled by nearest neighbour, then padded to even sizes (yuv420p needs them).
  const std::string filter =
      fmt::format("scale=iw*{0}:ih*{0}:flags=neighbor,pad=ceil(iw/2)*2:ceil(ih/2)*2", scale);
  std::vector<std::string> args = {"ffmpeg",
                                   "-nostdin",
                                   "-loglevel",
                                   "error",
                                   "-y",
                                   "-f",
                                   "rawvideo",
                                   "-pix_fmt",
                                   "rgb24",
                                   "-s",
                                   fmt::format("{}x{}", width, height),
                                   "-r",
                                   std::to_string(fps),
                                   "-i",
                                   "pipe:0",
                                   "-vf",
                                   filter};
  if (yuv_container(path_)) {
    for (const char* a : {"-c:v", "libx264", "-pix_fmt", "yuv420p"}) args.push_back(a);
  }
  args.push_back("file:" + path_);  // a file's name, never a protocol ("pipe:1", "tcp://…")
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log, 2);
  const int spawned = posix_spawnp(&pid_, "ffmpeg", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[0]);
  close(log);
  if (spawned != 0) {
    close(pipe_fds[1]);
    pid_ = -1;
    std::remove(log_template.c_str());
    throw Error(
        fmt::format("--video: cannot start ffmpeg ({}); tools/setup-deps installs Debian's ffmpeg",
                    std::strerror(spawned)));
  }
  log_path_ = log_template;
  input_ = pipe_fds[1];
  // Written without blocking: a stalled ffmpeg is noticed at the frame's
  // deadline (poll says writable while one page is free; a blocking write
  // of a larger frame would wait for all of it).
  fcntl(input_, F_SETFL, fcntl(input_, F_GETFL) | O_NONBLOCK);
}

VideoWriter::~VideoWriter() {
  stop();
  if (!finished_) std::remove(path_.c_str());  // no partial video left behind
  if (!log_path_.empty()) std::remove(log_path_.c_str());
}

void VideoWriter::add_frame(const uint8_t* rgb) {
  const auto* at = rgb;
  int64_t left = frame_bytes_;
  const auto deadline = std::chrono::steady_clock::now() + kFrameTimeout;
  while (left > 0) {
    const ssize_t n = write(input_, at, static_cast<size_t>(left));
    if (n > 0) {
      at += n;
      left -= n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (wait.count() <= 0) {
        stop();
        throw Error(fmt::format("--video: ffmpeg took no frame for {} s", kFrameTimeout.count()));
      }
      pollfd p{input_, POLLOUT, 0};
      poll(&p, 1, static_cast<int>(std::min<int64_t>(wait.count(), 1000)));
      continue;
    }
    stop();
    throw Error(fmt::format("--video: ffmpeg stopped taking frames: {}", ffmpeg_error()));
  }
  ++frames_;
}

void VideoWriter::finish() {
  close(input_);
  input_ = -1;
  const auto deadline = std::chrono::steady_clock::now() + kFinishTimeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw Error(fmt::format("--video: ffmpeg did not finish {} within {} s", path_,
                              kFinishTimeout.count()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw Error(fmt::format("--video: ffmpeg failed to write {}: {}", path_, ffmpeg_error()));
  }
  finished_ = true;
}

std::string VideoWriter::ffmpeg_error() const {
  std::ifstream in(log_path_);
  std::string line, last = "no message";
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

void VideoWriter::stop() {
  if (input_ >= 0) close(input_);
  input_ = -1;
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);  // SIGKILL: it ends
  pid_ = -1;
}

}  // namespace pronghorn::cli
