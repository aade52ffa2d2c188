#include "remote/unroll_stream.h"

namespace pronghorn::remote {
namespace {

class Refused final : public grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply> {
 public:
  explicit Refused(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<v1::UnrollMessage, v1::UnrollReply>* UnrollStream::refused(
    const grpc::Status& status) {
  return new Refused(status);
}

UnrollStream::UnrollStream(Sessions& sessions, std::shared_ptr<Session> session,
                           const std::string& peer)
    : sessions_(sessions), session_(std::move(session)) {
  Poke first;
  const grpc::Status status = sessions_.open(session_, this, peer, first);
  if (!status.ok()) {
    Finish(status);
    return;
  }
  opened_ = true;
  StartRead(&in_);
  perform(first);
}

void UnrollStream::act(StreamAction action, const grpc::Status& status) {
  if (action == StreamAction::kWrite) StartWrite(&out_);
  if (action == StreamAction::kFinish) Finish(status);
}

void UnrollStream::OnReadDone(bool ok) {
  if (!ok) {  // the node half-closed, or the call ended
    perform(sessions_.finishing(*session_, grpc::Status::OK));
    return;
  }
  Poke next;
  const grpc::Status status = sessions_.take(*session_, in_, next);
  if (!status.ok()) {
    perform(sessions_.finishing(*session_, status));
    return;
  }
  StartRead(&in_);
  perform(next);
}

void UnrollStream::OnWriteDone(bool ok) { perform(sessions_.written(*session_, ok)); }

void UnrollStream::OnDone() {
  if (opened_) sessions_.closed(*session_);
  delete this;
}

}  // namespace pronghorn::remote
