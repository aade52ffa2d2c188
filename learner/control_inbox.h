// The learner's side of the control plane (docs/architecture.md §4): the
// requests its ControlBoard hands over between learner steps (scale,
// checkpoint, stop), the status published on it, and the stop asked by a
// request or a signal. Closing it (at the end of the run, or when the loop
// ends on an error) answers what is still queued and ends status streams.
// Threads: one (the learner's loop).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "learner/actor_fleet.h"
#include "learner/control_board.h"
#include "learner/learner_step.h"
#include "learner/schedule.h"

namespace pronghorn::learner {

class ControlInbox {
 public:
  using StatusFn = std::function<v1::Status()>;

  // `stop`: set by SIGINT/SIGTERM.
  ControlInbox(ControlBoard& board, const std::atomic<bool>& stop, int rank);
  ~ControlInbox() { board_.close(); }
  ControlInbox(const ControlInbox&) = delete;
  ControlInbox& operator=(const ControlInbox&) = delete;

  // Carries out every queued request; each reply follows the status it
  // changed, published through `status`.
  void handle(ActorFleet& fleet, Schedule& schedule, const StatusFn& status);
  // Publishes `status()` when 100 ms have passed since the last one.
  void publish_if_due(const StatusFn& status);
  void publish(const v1::Status& status) { board_.publish(status); }
  int control_port() const { return board_.control_port(); }

  bool stopping() const { return stop_.load() || stop_requested_; }
  bool stop_requested() const { return stop_requested_; }
  bool checkpoint_at_stop() const { return checkpoint_at_stop_; }
  StepVotes votes() const {
    return {.stop = stopping(), .stop_now = stop_requested_ && !checkpoint_at_stop_};
  }
  // Several learners voted to stop (`now`: without a checkpoint).
  void stopped_by_vote(bool now);

  // The run is over: new requests are refused, status streams end, and each
  // stop request is answered with the final checkpoint ("" if none).
  void close(const std::string& final_checkpoint);

 private:
  ControlBoard& board_;
  const std::atomic<bool>& stop_;
  const int rank_;
  bool stop_requested_ = false, checkpoint_at_stop_ = true;
  std::vector<ControlAnswer> stop_replies_;  // answered once stopped
  std::chrono::steady_clock::time_point published_at_{};
};

}  // namespace pronghorn::learner
