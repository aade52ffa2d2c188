// Sessions' credits (remote/sessions.h): how many ring slots each session
// should hold, and the thread that claims them.
#include <algorithm>

#include "remote/sessions.h"

namespace pronghorn::remote {

using namespace std::chrono_literals;

// Credits follow demand: a stream opens with the whole window, then holds
// what its node says is waiting plus one. So a node with nothing to send
// ties up one slot, not remote.credits, once it has sent.
uint32_t Sessions::wanted(const Session& s) const {
  if (s.last_sequence == 0) return credits_;
  return std::min(credits_, s.waiting + 1);
}

// Round robin among sessions short of what they want, while every session
// together holds fewer than max_held_ slots (the learner's own actors and
// batch always keep the rest of the ring, whatever nodes do).
std::shared_ptr<Session> Sessions::wanting_credit() {
  if (ending_ || sessions_.empty()) return nullptr;
  std::vector<std::shared_ptr<Session>> wanting;
  size_t held = 0;
  for (auto& [id, s] : sessions_) {
    held += s->held.size();
    if (s->stream != nullptr && !s->finish && s->held.size() < wanted(*s)) wanting.push_back(s);
  }
  if (wanting.empty() || held >= max_held_) return nullptr;
  return wanting[next_grant_++ % wanting.size()];
}

void Sessions::grant() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    const std::shared_ptr<Session> session = wanting_credit();
    if (!session) {
      changed_.wait_for(lock, 100ms);
      continue;
    }
    lock.unlock();
    // Blocks in the ring's futex while no slot is FREE: the learner is
    // behind, and the node gets no credit until it catches up.
    const std::optional<uint32_t> slot = ring_.claim(50ms);
    lock.lock();
    if (!slot) continue;
    if (!session->current || session->stream == nullptr || session->finish ||
        session->held.size() >= wanted(*session)) {
      ring_.abandon(*slot);
      continue;
    }
    session->held.push_back(*slot);
    ++session->credits_untold;
    const Poke next = poke(*session);
    lock.unlock();
    perform(next);
    lock.lock();
  }
}

}  // namespace pronghorn::remote
