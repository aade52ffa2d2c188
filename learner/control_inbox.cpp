#include "learner/control_inbox.h"

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace pronghorn::learner {

using namespace std::chrono_literals;

ControlInbox::ControlInbox(ControlBoard& board, const std::atomic<bool>& stop, int rank)
    : board_(board), stop_(stop), rank_(rank) {}

void ControlInbox::handle(ActorFleet& fleet, Schedule& schedule, const StatusFn& status) {
  while (std::optional<ControlBoard::Pending> pending = board_.next()) {
    const ControlRequest& r = pending->request;
    ControlReply reply;
    try {
      switch (r.kind) {
        case ControlRequest::Kind::kScaleActors:
          fleet.scale(r, reply);
          break;
        case ControlRequest::Kind::kSaveCheckpoint:
          if (rank_ != 0)
            throw UsageError("checkpoints are written by rank 0: ask its control plane");
          reply.checkpoint_path = schedule.checkpoint();
          spdlog::info("checkpoint {} (requested)", reply.checkpoint_path);
          break;
        case ControlRequest::Kind::kStop:
          spdlog::info("stop requested ({})", r.graceful ? "graceful" : "immediate");
          stop_requested_ = true;
          checkpoint_at_stop_ = checkpoint_at_stop_ && r.graceful;
          stop_replies_.push_back(std::move(pending->reply));
          continue;  // answered once stopped
      }
    } catch (const std::exception& e) {  // a failed checkpoint write: the job goes on
      spdlog::error("control request failed: {}", e.what());
      reply.error = e.what();
      reply.refused = dynamic_cast<const UsageError*>(&e) != nullptr;  // a scale past the cap
    }
    board_.publish(status());  // before the reply: a caller's next GetStatus sees the change
    pending->reply(reply);
  }
}

void ControlInbox::publish_if_due(const StatusFn& status) {
  const auto now = std::chrono::steady_clock::now();
  if (now - published_at_ < 100ms) return;
  board_.publish(status());
  published_at_ = now;
}

void ControlInbox::stopped_by_vote(bool now) {
  stop_requested_ = true;
  if (now) checkpoint_at_stop_ = false;
}

void ControlInbox::close(const std::string& final_checkpoint) {
  board_.close();  // refuse new requests; end status streams
  ControlReply stopped;
  stopped.checkpoint_path = final_checkpoint;
  for (ControlAnswer& reply : stop_replies_) reply(stopped);
  stop_replies_.clear();
}

}  // namespace pronghorn::learner
