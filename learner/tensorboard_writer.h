// TensorBoard's event files, written natively (no TensorFlow, no Python):
// `<dir>/events.out.tfevents.<unix secs>.<host>.<pid>`, a TFRecord stream of
// serialized Event messages (proto/tensorboard.proto). Each record is
//
//   uint64 length | uint32 masked CRC-32C of those 8 bytes |
//   length bytes  | uint32 masked CRC-32C of the bytes        (little-endian)
//
// with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. A file's first Event
// holds file_version "brain.Event:2"; each write() after it adds one Event
// (step, wall_time, a Summary of scalars). Every process start makes a new
// file, which is what TensorBoard expects of a resumed run.
//
// Each record reaches the kernel in one write(2) call before write() returns,
// so a crash loses at most the report being written; a record that cannot be
// written whole (a full disk) is cut back off the file, never left torn, and
// the next write() tries again.
// Threads: one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), TFRecord's checksum.
uint32_t crc32c(std::string_view bytes);
// TFRecord's masked form of a CRC (a CRC over bytes that hold CRCs stays useful).
uint32_t mask_crc(uint32_t crc);
// One framed TFRecord holding `payload`.
std::string tfrecord(std::string_view payload);

struct Scalar {
  std::string tag;  // "loss/entropy"
  double value;     // stored as a float (Summary.Value.simple_value)
};

// The numbers of `status` that are curves, one Scalar each, in four groups
// TensorBoard shows as sections: train/ (returns, losses, rates, learning
// rate), system/ (uptime, the ring, actors, stage times), cluster/ (the
// all-reduce, the ranks' and remote nodes' rows; only with several ranks or
// remote nodes), and eval/ (evaluation_scalars). Each tag is the group, then
// the metrics.jsonl key with '/' where that key joins a nested message with
// '_' (`loss_entropy` → `train/loss/entropy`, `stage_time_actor_env_s` →
// `system/stage_time/actor_env_s`); rows of a repeated field by index
// (`cluster/ranks/1/sps`). Left out: strings and booleans, constants of the
// run (total_steps, ring_slots, …), the x axis (env_steps), and the
// evaluation's figures, which change once per evaluation.
std::vector<Scalar> status_scalars(const v1::Status& status);

// The newest evaluation's return mean and std and its episode count
// (eval/return_mean, eval/return_std, eval/episodes), or none before the
// first. Written once per evaluation at the env steps it was measured at
// (eval_env_steps), so the curve has one point per evaluation.
std::vector<Scalar> evaluation_scalars(const v1::Status& status);

class TensorBoardWriter {
 public:
  // Names this process's events file in `dir` and tries to create both
  // (with the file_version event); a failure is kept for write() to report
  // and retry, never thrown.
  TensorBoardWriter(std::string dir, double wall_time);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends one Event: `step`, `wall_time` (seconds since the Unix epoch) and
  // a Summary of `scalars`. False when it could not be written (error() says
  // why); the file then holds what it held before.
  bool write(int64_t step, double wall_time, const std::vector<Scalar>& scalars);

  const std::string& path() const { return path_; }
  const std::string& error() const { return error_; }  // the last failure

 private:
  bool open(double wall_time);  // creates dir_ and path_, writes file_version
  bool append(const std::string& record);

  const std::string dir_;
  std::string path_;
  std::string error_;
  int fd_ = -1;
  off_t size_ = 0;  // where the last whole record ends
};

}  // namespace pronghorn::learner
