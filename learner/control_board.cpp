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

ControlAnswer& ControlAnswer::operator=(ControlAnswer&& other) noexcept {
  if (this != &other) {
    if (callback_) callback_(job_ending());
    callback_ = std::exchange(other.callback_, {});
  }
  return *this;
}

ControlAnswer::~ControlAnswer() {
  if (callback_) callback_(job_ending());
}

void ControlAnswer::operator()(const ControlReply& reply) {
  if (Callback callback = std::exchange(callback_, {})) callback(reply);
}

void ControlBoard::publish(v1::Status status) {
  std::lock_guard lock(mutex_);
  status_ = std::move(status);
}

v1::Status ControlBoard::status() const {
  std::lock_guard lock(mutex_);
  v1::Status status = status_;
  status.set_metrics_port(static_cast<uint32_t>(metrics_port_));
  return status;
}

void ControlBoard::set_metrics_port(int port) {
  std::lock_guard lock(mutex_);
  metrics_port_ = port;
}

void ControlBoard::set_control_port(int port) {
  std::lock_guard lock(mutex_);
  control_port_ = port;
}

int ControlBoard::control_port() const {
  std::lock_guard lock(mutex_);
  return control_port_;
}

std::optional<ControlBoard::Pending> ControlBoard::next() {
  std::lock_guard lock(mutex_);
  if (queue_.empty()) return std::nullopt;
  Pending pending = std::move(queue_.front());
  queue_.pop_front();
  return pending;
}

void ControlBoard::submit(const ControlRequest& request, ControlAnswer answer) {
  {
    std::lock_guard lock(mutex_);
    if (!closed_) {
      queue_.push_back({request, std::move(answer)});
      return;
    }
  }
  answer(job_ending());  // outside the lock: the answer may call back into gRPC
}

void ControlBoard::close() {
  std::deque<Pending> refused;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    status_.set_stopping(true);
    refused.swap(queue_);
  }
  closed_cv_.notify_all();
  for (Pending& p : refused) p.reply(job_ending());
}

bool ControlBoard::wait_closed_until(Clock::time_point deadline) const {
  std::unique_lock lock(mutex_);
  return closed_cv_.wait_until(lock, deadline, [this] { return closed_; });
}

}  // namespace pronghorn::learner
