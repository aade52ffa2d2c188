#include "control/status_streams.h"

#include <algorithm>
#include <utility>

namespace pronghorn::control {
namespace {

using Clock = ControlBoard::Clock;

// A stream that ends before it starts, with `status`.
class Refused final : public grpc::ServerWriteReactor<v1::Status> {
 public:
  explicit Refused(grpc::Status status) { Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

// One WatchStatus call. Writes are started by the pacing thread only, one at
// a time; Finish is called exactly once, by whoever ends the stream first
// (the pacing thread, a failed write, or a cancellation). The mutex is
// recursive because gRPC may run a reaction inline in the thread that
// finishes the call.
class StatusStreams::Stream final : public grpc::ServerWriteReactor<v1::Status> {
 public:
  Stream(StatusStreams& owner, Clock::duration interval) : owner_(owner), interval_(interval) {}

  // Sends `status` when it is due (`last`: now, and ends the stream with
  // it); returns when it wants to be asked again.
  Clock::time_point tick(Clock::time_point now, const v1::Status& status, bool last) {
    std::lock_guard lock(mutex_);
    if (finished_) return Clock::time_point::max();
    if (writing_) {  // a slow reader: no second write queued behind the first
      if (last) end(grpc::Status::OK);
      return now + interval_;
    }
    if (!last && now < due_) return due_;
    message_ = status;
    due_ = now + interval_;
    if (last) {
      finished_ = true;
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
      return Clock::time_point::max();
    }
    writing_ = true;
    StartWrite(&message_);
    return due_;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard lock(mutex_);
    writing_ = false;
    if (!ok) end(grpc::Status::OK);  // the caller is gone
  }
  void OnCancel() override {
    std::lock_guard lock(mutex_);
    end(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    owner_.forget(this);
    delete this;
  }

 private:
  void end(grpc::Status status) {
    if (finished_) return;
    finished_ = true;
    Finish(std::move(status));
  }

  StatusStreams& owner_;
  const Clock::duration interval_;
  std::recursive_mutex mutex_;
  bool writing_ = false, finished_ = false;
  Clock::time_point due_{};
  v1::Status message_;  // the one in flight
};

grpc::ServerWriteReactor<v1::Status>* StatusStreams::refused(grpc::Status status) {
  return new Refused(std::move(status));
}

StatusStreams::StatusStreams(const ControlBoard& board)
    : board_(board), thread_([this] { pace(); }) {}

StatusStreams::~StatusStreams() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  thread_.join();
}

grpc::ServerWriteReactor<v1::Status>* StatusStreams::open(std::chrono::nanoseconds interval) {
  std::lock_guard lock(mutex_);
  if (streams_.size() >= kMaxStreams) {
    return refused({grpc::StatusCode::RESOURCE_EXHAUSTED, "too many status streams open (" +
                                                              std::to_string(kMaxStreams) +
                                                              "); cancel one, or use GetStatus"});
  }
  auto* stream = new Stream(*this, std::chrono::duration_cast<Clock::duration>(interval));
  streams_.insert(stream);
  stream->tick(Clock::now(), board_.status(), closed_);  // the first status at once
  return stream;
}

void StatusStreams::forget(Stream* stream) {
  std::lock_guard lock(mutex_);
  streams_.erase(stream);
}

void StatusStreams::pace() {
  for (bool closed = false;;) {
    // Wakes at least every second, so a destructor called before the board
    // closes (a server that failed to start) is not kept waiting.
    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      closed_ = closed;
      if (!streams_.empty()) {
        const Clock::time_point now = Clock::now();
        const v1::Status status = board_.status();
        for (Stream* s : streams_) next = std::min(next, s->tick(now, status, closed));
      }
    }
    if (closed) return;  // every stream has ended; later ones end at open()
    closed = board_.wait_closed_until(next);
  }
}

}  // namespace pronghorn::control
