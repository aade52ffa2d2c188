// The WatchStatus streams of the control plane: each sends the ControlBoard's
// status every interval until its caller cancels or the board closes, and
// then ends with a last status that says `stopping`. One thread of its own
// paces every stream, so no stream holds a thread while it waits for its next
// interval (a sync gRPC server spends one per stream); a cancelled stream is
// gone at once; at most kMaxStreams are open at a time, apart from unary calls.
// Threads: gRPC's callback threads call open() and the streams' reactions;
// the owner constructs it, closes the board, then destroys it after the gRPC
// server has shut down.
#pragma once

#include <grpcpp/support/server_callback.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "learner/control_board.h"

namespace pronghorn::control {

using learner::ControlBoard;

class StatusStreams {
 public:
  static constexpr size_t kMaxStreams = 64;

  explicit StatusStreams(const ControlBoard& board);
  // Ends the pacing thread; the board must be closed first.
  ~StatusStreams();

  // A stream sending a status now and every `interval`; one that ends at once
  // with RESOURCE_EXHAUSTED when kMaxStreams are open.
  grpc::ServerWriteReactor<v1::Status>* open(std::chrono::nanoseconds interval);
  // A stream that ends at once with `status` (a refused call).
  static grpc::ServerWriteReactor<v1::Status>* refused(grpc::Status status);

 private:
  class Stream;
  void pace();  // the pacing thread: until the board closes
  void forget(Stream* stream);

  const ControlBoard& board_;
  std::mutex mutex_;
  std::set<Stream*> streams_;  // open, not yet done
  bool closed_ = false;        // the board closed: new streams end at once
  bool stopping_ = false;      // the destructor runs
  std::thread thread_;
};

}  // namespace pronghorn::control
