#include "remote/sessions.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "core/clock.h"
#include "core/token.h"
#include "remote/unroll_stream.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using namespace std::chrono_literals;

constexpr size_t kEndedSessionsKept = 4096;  // for rejoins naming their previous session
constexpr auto kUnopenedSessionLife = 60s;

// An unroll of `s` may still be committed: its stream can still ack it (a
// read may complete after Finish, and a stream finishing in error sends no
// more replies; an unacked unroll is one the node counts as lost).
bool can_commit(const Session& s) {
  return s.current && !s.finished && (!s.finish || s.finish->ok());
}

}  // namespace

void perform(const Poke& poke) {
  if (poke.stream != nullptr) poke.stream->act(poke.action, poke.status);
}

void perform(const std::vector<Poke>& pokes) {
  for (const Poke& poke : pokes) perform(poke);
}

Sessions::Sessions(buffer::Ring& ring, const buffer::WeightSlab& slab, uint32_t credits,
                   uint32_t max_held, int default_processes)
    : ring_(ring),
      slab_(slab),
      credits_(credits),
      max_held_(max_held == 0 ? ring.slots() : max_held),
      default_processes_(default_processes),
      slot_bytes_(ring.layout().bytes),
      granter_([this] { grant(); }) {}

Sessions::~Sessions() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  granter_.join();
  std::lock_guard lock(mutex_);
  for (auto& [id, session] : sessions_) {
    for (uint32_t slot : session->held) ring_.abandon(slot);
    session->held.clear();
  }
}

Poke Sessions::poke(Session& s) {
  if (s.stream == nullptr || s.finished || s.writing) return {};
  // A stream ending well acks every unroll it committed first: the node
  // counts an unacked one as lost in flight.
  if (s.finish && !(s.finish->ok() && s.last_sequence != s.acked_told)) {
    s.finished = true;
    return {s.stream, StreamAction::kFinish, *s.finish};
  }
  const uint32_t processes = nodes_[s.node].desired;
  const bool tell_end = job_ended_ && !s.end_told;
  if (s.credits_untold == 0 && s.last_sequence == s.acked_told && processes == s.processes_told &&
      !tell_end) {
    return {};
  }
  v1::UnrollReply& reply = s.stream->reply();
  reply.Clear();
  reply.set_acked(s.last_sequence);
  reply.set_credits(s.credits_untold);
  reply.set_processes(processes);
  reply.set_job_ended(tell_end);
  s.acked_told = s.last_sequence;
  s.credits_untold = 0;
  s.processes_told = processes;
  s.end_told = s.end_told || tell_end;
  s.writing = true;
  return {s.stream, StreamAction::kWrite, {}};
}

void Sessions::end_session(Session& s, std::vector<Poke>& pokes) {
  if (!s.current) return;
  s.current = false;
  ended_received_[s.id] = {s.node, s.received};
  ended_order_.push_back(s.id);
  if (ended_order_.size() > kEndedSessionsKept) {
    ended_received_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
  for (uint32_t slot : s.held) ring_.abandon(slot);
  s.held.clear();
  if (s.stream != nullptr && !s.finish) {
    s.finish = grpc::Status(
        grpc::StatusCode::ABORTED,
        fmt::format("session {} of node {} was replaced by a newer one", s.id, s.node));
    pokes.push_back(poke(s));
  }
  sessions_.erase(s.id);  // last: may drop the last reference but for the caller's
}

Sessions::Joined Sessions::join(const v1::JoinRequest& request) {
  std::vector<Poke> pokes;
  Joined joined;
  {
    std::lock_guard lock(mutex_);
    if (ending_) {
      joined.refused = {grpc::StatusCode::UNAVAILABLE, "the learner is stopping"};
      return joined;
    }
    if (auto known = nodes_.find(request.node_name());
        known != nodes_.end() && known->second.connected &&
        known->second.session != request.previous_session()) {
      joined.refused = {grpc::StatusCode::ALREADY_EXISTS,
                        fmt::format("node {} is already connected from {}; give this one another "
                                    "--name",
                                    request.node_name(), known->second.peer)};
      return joined;
    }
    if (!nodes_.count(request.node_name()) && !forget_a_node()) {
      joined.refused = {grpc::StatusCode::RESOURCE_EXHAUSTED,
                        fmt::format("{} actor-only nodes are connected: no more", kMaxNodes)};
      return joined;
    }
    // A session whose node never opened its stream ends after a while, so
    // joins alone (a node that dies at once, a client that only joins)
    // cannot pile sessions up.
    std::vector<std::shared_ptr<Session>> idle;
    for (auto& [id, s] : sessions_) {
      if (s->stream == nullptr && Clock::now() - s->joined > kUnopenedSessionLife)
        idle.push_back(s);
    }
    for (const auto& s : idle) end_session(*s, pokes);
    Node& node = nodes_[request.node_name()];
    // Only this node's own sessions: a previous_session naming another
    // node's ends nothing and learns nothing.
    for (const std::string& id : {node.session, request.previous_session()}) {
      auto found = sessions_.find(id);
      if (found != sessions_.end() && found->second->node == request.node_name()) {
        const std::shared_ptr<Session> keep = found->second;
        end_session(*keep, pokes);
      }
    }
    if (auto found = ended_received_.find(request.previous_session());
        found != ended_received_.end() && found->second.first == request.node_name()) {
      joined.previous_received = static_cast<int64_t>(found->second.second);
    }
    auto session = std::make_shared<Session>();
    session->id = generate_token().substr(0, 16);
    session->node = request.node_name();
    session->joined = Clock::now();
    sessions_[session->id] = session;
    if (node.sessions++ == 0) node.rate_since = Clock::now();
    if (!node.scaled) {  // the node's own count (it may have restarted with another)
      node.desired =
          request.processes() > 0 ? request.processes() : static_cast<uint32_t>(default_processes_);
    }
    node.session = session->id;
    node.last_seen = Clock::now();
    joined.session = session;
    joined.processes = node.desired;
  }
  perform(pokes);
  return joined;
}

bool Sessions::forget_a_node() {
  if (nodes_.size() < kMaxNodes) return true;
  auto oldest = nodes_.end();
  for (auto it = nodes_.begin(); it != nodes_.end(); ++it) {
    if (it->second.connected || sessions_.count(it->second.session)) continue;
    if (oldest == nodes_.end() || it->second.last_seen < oldest->second.last_seen) oldest = it;
  }
  if (oldest == nodes_.end()) return false;
  nodes_.erase(oldest);
  return true;
}

std::shared_ptr<Session> Sessions::find(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto found = sessions_.find(id);
  return found == sessions_.end() ? nullptr : found->second;
}

grpc::Status Sessions::open(const std::shared_ptr<Session>& session, UnrollStream* stream,
                            const std::string& peer, Poke& out) {
  std::lock_guard lock(mutex_);
  if (ending_) return {grpc::StatusCode::UNAVAILABLE, "the learner is stopping"};
  if (!session->current) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            fmt::format("session {} has ended: join again", session->id)};
  }
  if (session->stream != nullptr) {
    return {grpc::StatusCode::ALREADY_EXISTS,
            fmt::format("session {} already streams unrolls", session->id)};
  }
  session->stream = stream;
  ++open_streams_;
  Node& node = nodes_[session->node];
  node.connected = true;
  node.peer = peer;
  node.last_seen = Clock::now();
  out = poke(*session);
  changed_.notify_all();  // the granter: a session wanting credit
  return grpc::Status::OK;
}

grpc::Status Sessions::take(Session& s, const v1::UnrollMessage& m, Poke& out) {
  using grpc::StatusCode;
  if (m.slot().size() != slot_bytes_) {
    return {StatusCode::INVALID_ARGUMENT, fmt::format("unroll {}: {} bytes, expected a slot of {}",
                                                      m.sequence(), m.slot().size(), slot_bytes_)};
  }
  // At most one finished episode per env step: the learner reads that many
  // rows of the slot's episode fields.
  if (const uint64_t most = ring_.layout().episode_returns.bytes / sizeof(float);
      m.episodes() > most) {
    return {StatusCode::INVALID_ARGUMENT,
            fmt::format("unroll {}: {} episodes, more than its {} env steps", m.sequence(),
                        m.episodes(), most)};
  }
  if (crc32_of(m.slot().data(), m.slot().size()) != m.checksum()) {
    return {StatusCode::DATA_LOSS, fmt::format("unroll {}: checksum mismatch", m.sequence())};
  }
  uint32_t slot = 0;
  {
    std::lock_guard lock(mutex_);
    if (!can_commit(s)) return {StatusCode::ABORTED, "session ended"};
    if (m.sequence() != s.last_sequence + 1) {
      return {StatusCode::INVALID_ARGUMENT,
              fmt::format("unroll sequence {}: expected {}", m.sequence(), s.last_sequence + 1)};
    }
    if (m.policy_version() > slab_.version()) {
      return {StatusCode::INVALID_ARGUMENT,
              fmt::format("unroll {}: policy version {} is newer than the learner's {}",
                          m.sequence(), m.policy_version(), slab_.version())};
    }
    if (s.held.empty()) {
      return {StatusCode::FAILED_PRECONDITION,
              fmt::format("unroll {} sent without a credit", m.sequence())};
    }
    slot = s.held.front();
    s.held.pop_front();
  }
  std::memcpy(ring_.slot_data(slot), m.slot().data(), slot_bytes_);
  std::lock_guard lock(mutex_);
  if (!can_commit(s)) {  // replaced or ended meanwhile: not counted, not committed
    ring_.abandon(slot);
    return {StatusCode::ABORTED, "session ended"};
  }
  ring_.commit(slot, {.policy_version = m.policy_version(),
                      .episodes = m.episodes(),
                      .actor = m.actor(),
                      .env_us = m.env_us(),
                      .policy_us = m.policy_us(),
                      .wait_us = m.wait_us()});
  s.last_sequence = m.sequence();
  s.waiting = m.waiting();
  ++s.received;
  ++committed_;
  Node& node = nodes_[s.node];
  ++node.unrolls;
  node.alive = m.processes_alive();
  node.last_seen = Clock::now();
  out = poke(s);
  changed_.notify_all();  // one held slot fewer: the granter may add one
  return grpc::Status::OK;
}

Poke Sessions::written(Session& s, bool ok) {
  std::lock_guard lock(mutex_);
  s.writing = false;
  if (!ok && !s.finish) s.finish = grpc::Status(grpc::StatusCode::CANCELLED, "node gone");
  if (s.end_told && !s.finish) s.finish = grpc::Status::OK;
  return poke(s);
}

Poke Sessions::finishing(Session& s, const grpc::Status& status) {
  std::lock_guard lock(mutex_);
  if (!s.finish) s.finish = status;
  return poke(s);
}

void Sessions::closed(Session& s) {
  std::vector<Poke> pokes;
  std::lock_guard lock(mutex_);
  s.stream = nullptr;  // done: nothing more to poke
  end_session(s, pokes);
  --open_streams_;
  Node& node = nodes_[s.node];
  if (node.session == s.id) {
    node.connected = false;
    node.alive = 0;  // as far as this learner knows
  }
  if (!s.end_told) ++node.disconnects;
  changed_.notify_all();
}

std::vector<v1::RemoteNode> Sessions::nodes() {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  std::vector<v1::RemoteNode> rows;
  for (auto& [name, node] : nodes_) {
    v1::RemoteNode& row = rows.emplace_back();
    row.set_name(name);
    row.set_session(node.session);
    row.set_connected(node.connected);
    row.set_peer(node.peer);
    row.set_processes_alive(node.alive);
    row.set_processes_desired(node.desired);
    // The rate over whole seconds: callers ask every 100 ms.
    if (const double interval = seconds(now - node.rate_since); interval >= 1.0) {
      node.rate = (node.unrolls - node.unrolls_at_rate) / interval;
      node.unrolls_at_rate = node.unrolls;
      node.rate_since = now;
    }
    row.set_unrolls_per_s(node.rate);
    row.set_unrolls(node.unrolls);
    row.set_last_seen_s(seconds(now - node.last_seen));
    row.set_disconnects(node.disconnects);
    row.set_sessions(node.sessions);
  }
  return rows;
}

bool Sessions::scale(const std::string& name, int processes) {
  Poke next;
  {
    std::lock_guard lock(mutex_);
    auto found = nodes_.find(name);
    if (found == nodes_.end()) return false;
    found->second.desired = static_cast<uint32_t>(processes);
    found->second.scaled = true;
    auto session = sessions_.find(found->second.session);
    if (session != sessions_.end()) next = poke(*session->second);
  }
  perform(next);
  return true;
}

void Sessions::wait_streams_closed(std::unique_lock<std::mutex>& lock,
                                   std::chrono::milliseconds wait) {
  changed_.wait_for(lock, wait, [this] { return open_streams_ == 0; });
}

void Sessions::end_job(std::chrono::milliseconds wait) {
  std::vector<Poke> pokes;
  std::unique_lock lock(mutex_);
  ending_ = job_ended_ = true;
  for (auto& [id, s] : sessions_) pokes.push_back(poke(*s));
  lock.unlock();
  perform(pokes);
  lock.lock();
  wait_streams_closed(lock, wait);
}

void Sessions::close_all(const grpc::Status& status, std::chrono::milliseconds wait) {
  std::vector<Poke> pokes;
  std::unique_lock lock(mutex_);
  ending_ = true;
  for (auto& [id, s] : sessions_) {
    if (!s->finish) s->finish = status;
    pokes.push_back(poke(*s));
  }
  lock.unlock();
  perform(pokes);
  lock.lock();
  wait_streams_closed(lock, wait);
}

bool Sessions::ending() const {
  std::lock_guard lock(mutex_);
  return ending_;
}

uint64_t Sessions::committed() const {
  std::lock_guard lock(mutex_);
  return committed_;
}

}  // namespace pronghorn::remote
