#include "learner/batch_prefetcher.h"

#include <utility>

#include "core/clock.h"

namespace pronghorn::learner {

using Clock = std::chrono::steady_clock;

BatchPrefetcher::BatchPrefetcher(buffer::Ring& ring, const envs::EnvSpec& spec,
                                 const Config& config, uint64_t version, Lockstep lockstep)
    : ring_(ring),
      spec_(spec),
      config_(config),
      lockstep_(lockstep),
      version_(version),
      thread_([this] { run(); }) {}

BatchPrefetcher::~BatchPrefetcher() { stop(); }

std::optional<PreparedBatch> BatchPrefetcher::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!gathered_.empty()) ring_.release(std::exchange(gathered_, {}));  // half a batch: lost
  std::optional<PreparedBatch> left = std::move(mailbox_);
  mailbox_.reset();
  return left;
}

void BatchPrefetcher::run() {
  try {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !mailbox_; });
        if (stopping_) return;
      }
      const auto wait_start = Clock::now();
      const uint64_t version = version_.load();
      auto taken = take(version);
      if (!taken) continue;
      const auto batch_start = Clock::now();
      PreparedBatch prepared{make_batch(*taken, ring_.layout(), spec_, config_, version),
                             taken->size(), seconds(batch_start - wait_start), 0};
      ring_.release(*taken);  // make_batch copied every field out of the slots
      prepared.batch_s = seconds_since(batch_start);
      {
        std::lock_guard lock(mutex_);
        mailbox_ = std::move(prepared);
      }
      changed_.notify_all();
    }
  } catch (...) {  // handed to the learner's loop, which decides
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    changed_.notify_all();
  }
}

// A short timeout: the stop flag is looked at between takes.
std::optional<std::vector<buffer::TakenSlot>> BatchPrefetcher::take(uint64_t version) {
  constexpr std::chrono::milliseconds kTimeout(100);
  if (lockstep_.actors == 0) {
    return ring_.take(static_cast<uint32_t>(config_.learner.batch_size), version,
                      static_cast<uint64_t>(config_.learner.max_policy_lag), kTimeout);
  }
  const auto actor = static_cast<uint32_t>(gathered_.size() / lockstep_.unrolls);
  auto taken = ring_.take_from(actor, lockstep_.unrolls, kTimeout);
  if (!taken) return std::nullopt;
  gathered_.insert(gathered_.end(), taken->begin(), taken->end());
  if (actor + 1 < lockstep_.actors) return std::nullopt;
  return std::exchange(gathered_, {});
}

std::optional<PreparedBatch> BatchPrefetcher::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return mailbox_.has_value() || error_; });
  if (error_) std::rethrow_exception(error_);
  std::optional<PreparedBatch> out = std::move(mailbox_);
  mailbox_.reset();
  lock.unlock();
  changed_.notify_all();  // the thread may prepare the next one
  return out;
}

}  // namespace pronghorn::learner
