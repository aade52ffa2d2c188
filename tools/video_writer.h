// A video file written by ffmpeg (Debian's; tools/setup-deps installs it)
// from RGB frames piped to its stdin: what `pronghorn eval --video` records.
// Frames are scaled up `scale` times with nearest neighbour, so pixels stay
// pixels; the codec follows the file's extension (H.264 in yuv420p for .mp4,
// .mkv, .mov; ffmpeg's default else). Every wait on ffmpeg has a deadline:
// a frame it does not take within kFrameTimeout, or a file it does not
// finish within kFinishTimeout, ends it (killed) with an Error.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace pronghorn::cli {

class VideoWriter {
 public:
  static constexpr std::chrono::seconds kFrameTimeout{30};
  static constexpr std::chrono::seconds kFinishTimeout{60};

  // Starts ffmpeg writing `path` (replaced if it exists) from frames of
  // width × height at `fps`. Error when ffmpeg cannot be started.
  VideoWriter(std::string path, int64_t width, int64_t height, int scale, int fps);
  ~VideoWriter();  // kills an ffmpeg still running; a file not finished is removed
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  // One frame, [height, width, 3] RGB bytes.
  void add_frame(const uint8_t* rgb);
  // Ends the stream and waits for ffmpeg; Error with ffmpeg's last line when
  // it fails.
  void finish();
  int64_t frames() const { return frames_; }
  int64_t frame_bytes() const { return frame_bytes_; }

 private:
  std::string ffmpeg_error() const;  // its last line on stderr
  void stop();                       // kills and reaps ffmpeg, if it runs

  std::string path_, log_path_;
  int64_t frame_bytes_;
  int input_ = -1;  // the write end of ffmpeg's stdin
  pid_t pid_ = -1;
  int64_t frames_ = 0;
  bool finished_ = false;  // ffmpeg wrote the whole file
};

}  // namespace pronghorn::cli
