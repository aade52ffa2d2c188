// One node's StreamUnrolls on the learner (remote/actor_gateway.h): reads
// unrolls one at a time into the ring through Sessions, and writes the
// replies Sessions decides on (acks, credits, the process count, the job's
// end). Deletes itself when gRPC is done with it.
// Threads: gRPC's callback threads, and whichever thread Sessions pokes it from.
#pragma once

#include <grpcpp/support/server_callback.h>

#include <memory>
#include <string>

#include "proto/remote.pb.h"
#include "remote/sessions.h"

namespace pronghorn::remote {

class UnrollStream final : public grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply> {
 public:
  // Opens `session`'s stream, or finishes at once with why not.
  UnrollStream(Sessions& sessions, std::shared_ptr<Session> session, const std::string& peer);

  // Carries out what Sessions decided (sessions.h Poke).
  void act(StreamAction action, const grpc::Status& status);
  // The reply Sessions fills before a kWrite.
  v1::UnrollReply& reply() { return out_; }

  // A stream refused before it had a session: finishes with `status` at once.
  static grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply>* refused(
      const grpc::Status& status);

 private:
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

  Sessions& sessions_;
  const std::shared_ptr<Session> session_;
  bool opened_ = false;
  v1::UnrollMessage in_;
  v1::UnrollReply out_;
};

}  // namespace pronghorn::remote
