// The most actors one node may be asked to run (ScaleActors, actor.count).
constexpr int kMaxActors = 1024;

// Where the control plane meets the learner's loop (DESIGN.md §4):
// gRPC threads → ControlBoard → learner loop. The loop publishes a status
// snapshot and, between learner steps, carries out the requests the gRPC
// threads queued (scale, checkpoint, stop), so the supervisor and the model
// stay owned by the loop's one thread.
// Threads: any thread may call any method.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <string>

#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

struct ControlRequest {
  enum class Kind { kScaleActors, kSaveCheckpoint, kStop };
  Kind kind = Kind::kSaveCheckpoint;
  int actors = 0;         // kScaleActors: the count wanted
  bool graceful = false;  // kStop: checkpoint first
};

struct ControlReply {
  std::string error;                    // empty on success
  bool job_ending = false;              // refused because the job is stopping
  std::string checkpoint_path;          // kSaveCheckpoint, graceful kStop
  int previous_actors = 0, actors = 0;  // kScaleActors
};

class ControlBoard {
 public:
  // Learner side.
  void publish(v1::Status status);
  // The oldest queued request, if any; answer it with `reply`.
  struct Pending {
    ControlRequest request;
    std::promise<ControlReply> reply;
  };
  std::optional<Pending> next();
  // The loop has ended: queued and later requests get an error, watchers stop.
  void close();

  // gRPC side.
  v1::Status status() const;
  // Queues `request`; the future is ready once the loop has carried it out
  // (or refused it because the job is ending).
  std::future<ControlReply> submit(const ControlRequest& request);
  // Sleeps up to `duration`; false as soon as the board is closed.
  bool sleep_unless_closed(std::chrono::duration<double> duration) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable closed_cv_;
  v1::Status status_;
  std::deque<Pending> queue_;
  bool closed_ = false;
};

}  // namespace pronghorn::learner
