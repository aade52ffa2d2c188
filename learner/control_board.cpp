#include "learner/control_board.h"

namespace pronghorn::learner {
namespace {

ControlReply job_ending() {
  ControlReply reply;
  reply.error = "the job is stopping";
  reply.job_ending = true;
  return reply;
}

}  // namespace

void ControlBoard::publish(v1::Status status) {
  std::lock_guard lock(mutex_);
  status_ = std::move(status);
}

v1::Status ControlBoard::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

std::optional<ControlBoard::Pending> ControlBoard::next() {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) return std::nullopt;
  Pending pending = std::move(queue_.front());
  queue_.pop_front();
  return pending;
}

std::future<ControlReply> ControlBoard::submit(const ControlRequest& request) {
  Pending pending{request, {}};
  std::future<ControlReply> reply = pending.reply.get_future();
  std::lock_guard lock(mutex_);
  if (closed_) {
    pending.reply.set_value(job_ending());
  } else {
    queue_.push_back(std::move(pending));
  }
  return reply;
}

void ControlBoard::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  status_.set_stopping(true);
  for (Pending& p : queue_) p.reply.set_value(job_ending());
  queue_.clear();
  closed_cv_.notify_all();
}

bool ControlBoard::sleep_unless_closed(std::chrono::duration<double> duration) const {
  std::unique_lock lock(mutex_);
  return !closed_cv_.wait_for(lock, duration, [this] { return closed_; });
}

}  // namespace pronghorn::learner
