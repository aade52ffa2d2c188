#include "remote/node_uploader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using namespace std::chrono_literals;

// Bounded waits, so a finishing Uploader is never stuck behind one.
constexpr auto kWait = 100ms;
// A clean finish half-closes the stream and waits this long at most for the
// learner's last cumulative ack (and for a Write held up by flow control),
// so what the node counts as acked is what the learner committed.
constexpr auto kFinishGrace = 2s;
constexpr auto kAckedEndGrace = 200ms;

}  // namespace

void NodeTally::end_session(uint64_t sent, uint64_t acked, std::optional<int64_t> received) {
  uint64_t landed = std::min(acked, sent);
  if (received && *received >= 0) {
    // Acks can be lost with the link, never unsent: the learner's count is
    // at least what it acked and at most what went out.
    landed = std::clamp<uint64_t>(static_cast<uint64_t>(*received), landed, sent);
  }
  acked_ += landed;
  lost_ += sent - landed;
}

std::string NodeTally::line(const std::string& node, uint64_t committed, uint64_t unsent) const {
  return fmt::format(
      "node {}: unrolls committed {} = acked {} + lost in flight {} + discarded {} + unsent {}",
      node, committed, acked_, lost_, discarded_, unsent);
}

Uploader::Uploader(v1::ActorGateway::Stub& stub, const SessionIds& ids, buffer::Ring& ring,
                   const LocalWeights& weights, const std::atomic<bool>& weights_ready,
                   const std::atomic<int>& alive)
    : incarnation_(ids.incarnation),
      ring_(ring),
      weights_(weights),
      weights_ready_(weights_ready),
      alive_(alive) {
  context_.AddMetadata("authorization", "Bearer " + ids.token);
  context_.AddMetadata(kSessionMetadata, ids.session);
  stream_ = stub.StreamUnrolls(&context_);
  reader_ = std::thread([this] { read_loop(); });
  writer_ = std::thread([this] { write_loop(); });
}

Uploader::~Uploader() { finish(); }

bool Uploader::ended() const {
  const std::lock_guard lock(mutex_);
  return ended_;
}

bool Uploader::job_ended() const {
  const std::lock_guard lock(mutex_);
  return job_ended_;
}

uint64_t Uploader::acked() const {
  const std::lock_guard lock(mutex_);
  return acked_;
}

std::optional<int> Uploader::wanted_processes() {
  const std::lock_guard lock(mutex_);
  return std::exchange(wanted_, std::nullopt);
}

void Uploader::read_loop() {
  v1::UnrollReply reply;
  while (stream_->Read(&reply)) {
    const std::lock_guard lock(mutex_);
    acked_ = std::max<uint64_t>(acked_, reply.acked());  // cumulative
    credits_ += reply.credits();                         // additive
    if (static_cast<int>(reply.processes()) != last_wanted_) {
      last_wanted_ = static_cast<int>(reply.processes());
      wanted_ = last_wanted_;
    }
    job_ended_ = job_ended_ || reply.job_ended();
    changed_.notify_all();
  }
  const std::lock_guard lock(mutex_);
  ended_ = true;
  changed_.notify_all();
}

void Uploader::write_loop() {
  write_unrolls();
  const std::lock_guard lock(mutex_);
  writer_done_ = true;
  changed_.notify_all();
}

bool Uploader::wait_for_credit() {
  std::unique_lock lock(mutex_);
  // Nothing more goes out once the learner said the job ended: it would
  // land unacked, and count as lost.
  changed_.wait_for(lock, kWait,
                    [&] { return credits_ > 0 || ended_ || finishing_ || job_ended_; });
  return !ended_ && !finishing_ && !job_ended_;
}

void Uploader::write_unrolls() {
  v1::UnrollMessage message;
  for (;;) {
    if (!weights_ready_.load()) {  // the session's first weights come before any unroll
      std::unique_lock lock(mutex_);
      if (changed_.wait_for(lock, kWait, [&] { return ended_ || finishing_; })) return;
      continue;
    }
    if (!wait_for_credit()) return;
    {
      const std::lock_guard lock(mutex_);
      if (credits_ == 0) continue;
    }
    // The node's uploader is its ring's one consumer. Learner version 0
    // drops nothing as stale: staleness is the learner's to judge.
    auto taken = ring_.take(1, /*learner_version=*/0, /*max_lag=*/0, kWait);
    if (!taken) continue;
    const buffer::TakenSlot& slot = taken->front();
    const std::optional<LearnerVersion> version = weights_.find(slot.stamp.policy_version);
    if (!version || version->incarnation != incarnation_) {
      ring_.release(*taken);
      const std::lock_guard lock(mutex_);
      ++discarded_;
      continue;
    }
    message.set_policy_version(version->version);
    message.set_checksum(crc32_of(slot.data, ring_.layout().bytes));
    message.set_episodes(slot.stamp.episodes);
    message.set_actor(slot.stamp.actor);
    message.set_env_us(slot.stamp.env_us);
    message.set_policy_us(slot.stamp.policy_us);
    message.set_wait_us(slot.stamp.wait_us);
    message.set_processes_alive(static_cast<uint32_t>(std::max(0, alive_.load())));
    message.set_slot(slot.data, ring_.layout().bytes);
    ring_.release(*taken);
    // The learner grants credits up to this plus one: the node's demand.
    message.set_waiting(static_cast<uint32_t>(
        std::min<uint64_t>(ring_.counters().ready, std::numeric_limits<uint32_t>::max())));
    {
      const std::lock_guard lock(mutex_);
      --credits_;
      message.set_sequence(++sent_);  // sent from here on: the rejoin settles whether it landed
    }
    if (!stream_->Write(message)) return;  // the stream is over; the reader sees why
  }
}

Uploader::Result Uploader::finish() {
  if (result_) return *result_;
  const auto grace_ends = std::chrono::steady_clock::now() + kFinishGrace;
  std::unique_lock lock(mutex_);
  finishing_ = true;
  changed_.notify_all();
  // The writer stops at its next credit wait; one held up in a Write by
  // flow control past the grace is cut loose by cancelling the stream.
  if (!changed_.wait_until(lock, grace_ends, [&] { return writer_done_; })) {
    lock.unlock();
    context_.TryCancel();
    lock.lock();
  }
  changed_.wait(lock, [&] { return writer_done_; });
  lock.unlock();
  writer_.join();
  // A stream still open is half-closed, not cancelled: the learner's last
  // cumulative ack still comes back, and only what it never acked counts
  // as lost. A learner that neither acks nor ends it within the grace is cut.
  bool half_closed = false;
  lock.lock();
  if (!ended_) {
    lock.unlock();
    half_closed = stream_->WritesDone();
    lock.lock();
  }
  changed_.wait_until(lock, grace_ends, [&] { return ended_ || (half_closed && acked_ >= sent_); });
  // Everything acked: a moment more for the learner to end the stream
  // itself, so that it sees a clean close rather than a cancel.
  if (!ended_ && half_closed && acked_ >= sent_) {
    changed_.wait_until(lock,
                        std::min(grace_ends, std::chrono::steady_clock::now() + kAckedEndGrace),
                        [&] { return ended_; });
  }
  if (!ended_) {
    lock.unlock();
    context_.TryCancel();
    lock.lock();
  }
  lock.unlock();
  reader_.join();
  Result r;
  r.status = stream_->Finish();
  lock.lock();
  r.sent = sent_;
  r.acked = std::min(acked_, sent_);
  r.discarded = discarded_;
  r.job_ended = job_ended_;
  result_ = r;
  return r;
}

}  // namespace pronghorn::remote
