// Where the control plane meets the learner's loop (docs/architecture.md §4):
// gRPC threads → ControlBoard → learner loop. The loop publishes a status
// snapshot and, between learner steps, carries out the requests the gRPC
// threads queued (scale, checkpoint, stop), so the supervisor and the model
// stay owned by the loop's one thread. A request's answer is a callback, so
// no gRPC thread waits for the loop.
// Threads: any thread may call any method.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "proto/pronghorn.pb.h"

namespace pronghorn::learner {

struct ControlRequest {
  enum class Kind { kScaleActors, kSaveCheckpoint, kStop };
  Kind kind = Kind::kSaveCheckpoint;
  int actors = 0;              // kScaleActors: the count wanted
  bool oversubscribe = false;  // kScaleActors: past what the node's cores and memory hold
  bool graceful = false;       // kStop: checkpoint first
  std::string node{};          // kScaleActors: an actor-only node's name ("" = this node)
};

struct ControlReply {
  std::string error;                    // empty on success
  bool refused = false;                 // not carried out, as asked (a scale past the cap)
  bool job_ending = false;              // refused because the job is stopping
  std::string checkpoint_path;          // kSaveCheckpoint, graceful kStop
  int previous_actors = 0, actors = 0;  // kScaleActors
};

// Answers one request exactly once: with the reply given, or, when it is
// destroyed unanswered (the loop ended on an error), with "the job is
// stopping". A gRPC call waiting on it therefore always ends.
class ControlAnswer {
 public:
  using Callback = std::function<void(const ControlReply&)>;
  ControlAnswer() = default;
  explicit ControlAnswer(Callback callback) : callback_(std::move(callback)) {}
  ControlAnswer(ControlAnswer&& other) noexcept : callback_(std::exchange(other.callback_, {})) {}
  ControlAnswer& operator=(ControlAnswer&& other) noexcept;
  ~ControlAnswer();

  void operator()(const ControlReply& reply);

 private:
  Callback callback_;  // empty once called
};

class ControlBoard {
 public:
  using Clock = std::chrono::steady_clock;

  // Learner side.
  void publish(v1::Status status);
  // The oldest queued request, if any; answer it with `reply`.
  struct Pending {
    ControlRequest request;
    ControlAnswer reply;
  };
  std::optional<Pending> next();
  // The loop has ended: queued and later requests are answered "the job is
  // stopping", and the status says `stopping`.
  void close();

  // Control-plane side.
  // The status last published, with the metrics port set.
  v1::Status status() const;
  // Where /metrics listens: the control plane's own fact, in every status.
  void set_metrics_port(int port);
  // Where the control plane listens; the learner passes it on to rank 0.
  void set_control_port(int port);
  int control_port() const;
  // Queues `request`; `answer` is called once the loop has carried it out, or
  // at once when the job is ending.
  void submit(const ControlRequest& request, ControlAnswer answer);
  // Waits until `deadline`; true as soon as the board is closed.
  bool wait_closed_until(Clock::time_point deadline) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable closed_cv_;
  v1::Status status_;
  int metrics_port_ = 0, control_port_ = 0;
  std::deque<Pending> queue_;
  bool closed_ = false;
};

}  // namespace pronghorn::learner
