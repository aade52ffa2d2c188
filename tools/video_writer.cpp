#include "tools/video_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
  const int log = mkstemp(log_template.data());
  PRONGHORN_CHECK(log >= 0,
                  "--video: cannot make a file for ffmpeg's messages: ", std::strerror(errno));
  log_path_ = log_template;
  int pipe_fds[2];
  PRONGHORN_CHECK(pipe2(pipe_fds, O_CLOEXEC) == 0, "--video: pipe: ", std::strerror(errno));
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
  args.push_back(path_);
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
    std::remove(log_path_.c_str());
    throw Error(
        fmt::format("--video: cannot start ffmpeg ({}); tools/setup-deps installs Debian's ffmpeg",
                    std::strerror(spawned)));
  }
  input_ = pipe_fds[1];
}

VideoWriter::~VideoWriter() {
  if (pid_ > 0) {
    stop();
    std::remove(path_.c_str());
  }
  if (!log_path_.empty()) std::remove(log_path_.c_str());
}

void VideoWriter::add_frame(const uint8_t* rgb) {
  const auto* at = rgb;
  int64_t left = frame_bytes_;
  while (left > 0) {
    pollfd p{input_, POLLOUT, 0};
    const int ready = poll(&p, 1, static_cast<int>(kFrameTimeout.count() * 1000));
    if (ready == 0) {
      stop();
      throw Error(fmt::format("--video: ffmpeg took no frame for {} s", kFrameTimeout.count()));
    }
    const ssize_t n = ready > 0 ? write(input_, at, static_cast<size_t>(left)) : -1;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = ffmpeg_error();
      stop();
      throw Error(fmt::format("--video: ffmpeg stopped taking frames: {}", why));
    }
    at += n;
    left -= n;
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
    std::remove(path_.c_str());
    throw Error(fmt::format("--video: ffmpeg failed to write {}: {}", path_, ffmpeg_error()));
  }
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
