#include "remote/actor_node.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "buffer/ring.h"
#include "buffer/segment_names.h"
#include "buffer/shared_memory.h"
#include "core/error.h"
#include "core/files.h"
#include "core/fnv.h"
#include "core/host_name.h"
#include "fleet/actor_capacity.h"
#include "fleet/actor_command.h"
#include "fleet/priority.h"
#include "fleet/stale_segments.h"
#include "fleet/supervisor.h"
#include "remote/node_session.h"
#include "remote/node_uploader.h"
#include "remote/node_weights.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long the node waits, once StreamWeights has ended, for StreamUnrolls
// to end too: at the job's end the learner closes both, and only the
// unroll stream says that the job is over.
constexpr auto kStreamsEndGrace = 2s;

// What killed nodes (kill -9) left behind: shared memory and config directories.
void remove_stale_leftovers() {
  fleet::remove_stale_segments();
  for (const std::string& dir : remove_dead_node_dirs(temp_base())) {
    spdlog::info("removed stale directory {} of a dead node", dir);
  }
}

// Seeds node actors' envs apart from every learner's (ranks < 4096) and,
// by name, from other nodes': actor/actor.cpp seeds from rank and actor id.
uint32_t seed_rank(const std::string& name) {
  return static_cast<uint32_t>(4096 + fnv1a(name) % 1'000'000);
}

class Node {
 public:
  Node(const NodeOptions& o, const std::atomic<bool>& stop)
      : o_(o),
        stop_(stop),
        name_(o.name),
        backoff_(fnv1a(o.name) ^ static_cast<uint64_t>(getpid())) {
    call_.learner = o.learner;
    call_.token = o.token;
    call_.give_up_after_s = o.give_up_after_s;
    stub_ = v1::ActorGateway::NewStub(make_channel(o));
    request_.set_node_name(name_);
    request_.set_version(o.version);
    const int processes = o.processes >= 0 ? o.processes : fleet::initial_actor_count({});
    request_.set_processes(static_cast<uint32_t>(processes));
    if (!o.plugin.empty()) {
      try {
        *request_.mutable_plugin() = plugin_identity(o.plugin);
      } catch (const Error& e) {
        throw UsageError(fmt::format("--plugin: {}", e.what()));
      }
    }
  }
  ~Node() { close(); }

  NodeExit run() {
    NodeExit exit;
    try {
      exit = serve();
    } catch (...) {
      close();
      throw;
    }
    close();
    return exit;
  }

 private:
  NodeExit serve();
  JoinEnd join(bool back_off_first, v1::JoinReply& reply);
  std::optional<NodeExit> unjoined(JoinEnd end) const;
  void set_up(const v1::JoinReply& reply);
  void joined(const v1::JoinReply& reply);
  bool serve_session(const v1::JoinReply& reply);
  void tick();
  void scale(int processes);
  NodeExit gave_up() const {
    return {kExitTransient,
            fmt::format("node {}: no learner answered at {} for {:g} s (--give-up-after)", name_,
                        o_.learner, o_.give_up_after_s)};
  }
  void close();

  const NodeOptions& o_;
  const std::atomic<bool>& stop_;
  const std::string name_;
  JoinCall call_;
  Backoff backoff_;
  std::unique_ptr<v1::ActorGateway::Stub> stub_;
  v1::JoinRequest request_;

  std::optional<NodeJob> job_;
  std::string job_id_, incarnation_;
  std::string ring_name_;
  std::unique_ptr<buffer::Ring> ring_;
  std::unique_ptr<LocalWeights> weights_;
  std::optional<NodeDir> dir_;
  std::optional<fleet::Supervisor> supervisor_;
  int wanted_ = 0;
  std::atomic<int> alive_{0};

  std::unique_ptr<WeightsReceiver> receiver_;
  std::unique_ptr<Uploader> uploader_;
  std::optional<Uploader::Result> unsettled_;  // the last session, until the next Join says
  NodeTally tally_;
  bool joined_ = false;  // a session existed: the tally is logged at exit
  bool closed_ = false;
};

JoinEnd Node::join(bool back_off_first, v1::JoinReply& reply) {
  return join_learner(
      *stub_, call_, request_, backoff_, back_off_first, stop_, [this] { tick(); }, reply);
}

// How the node ends when a Join did not join: stopped, or gave up.
std::optional<NodeExit> Node::unjoined(JoinEnd end) const {
  if (end == JoinEnd::kStopped) return NodeExit{0, fmt::format("node {}: stopped", name_)};
  if (end == JoinEnd::kGaveUp) return gave_up();
  return std::nullopt;
}

NodeExit Node::serve() {
  v1::JoinReply reply;
  if (auto left = unjoined(join(false, reply))) return *left;
  set_up(reply);
  for (;;) {
    joined(reply);
    const bool job_ended = serve_session(reply);
    if (stop_.load()) return {0, fmt::format("node {}: stopped", name_)};
    if (job_ended) return {0, fmt::format("node {}: the job {} ended", name_, job_id_)};
    request_.set_previous_session(reply.session());
    if (auto left = unjoined(join(true, reply))) return *left;
    if (reply.job_id() != job_id_) {
      return {0, fmt::format("node {}: the job {} is over (the learner at {} now runs job {})",
                             name_, job_id_, o_.learner, reply.job_id())};
    }
    tally_.end_session(unsettled_->sent, unsettled_->acked, reply.previous_session_received());
    unsettled_.reset();
    if (reply.incarnation() != incarnation_) {
      // The same job resumed (`--resume`): it must still fill this node's slots.
      const NodeJob again = read_job(reply, o_.learner, o_.plugin, o_.python);
      if (again.spec_hash != job_->spec_hash || again.slot_bytes != job_->slot_bytes) {
        throw UsageError(fmt::format(
            "the job {} resumed at {} with another unroll spec ({:016x}, slots of {} bytes; this "
            "node's {:016x}, {} bytes): start the node again",
            job_id_, o_.learner, again.spec_hash, again.slot_bytes, job_->spec_hash,
            job_->slot_bytes));
      }
      spdlog::info("node {}: the job {} resumed at {} (incarnation {} after {})", name_, job_id_,
                   o_.learner, reply.incarnation(), incarnation_);
    }
  }
}

// The first Join: the job's config checked here, then the node's ring, its
// slab-to-be and the config its actors read.
void Node::set_up(const v1::JoinReply& reply) {
  job_ = read_job(reply, o_.learner, o_.plugin, o_.python);
  if (job_->plugin) *request_.mutable_plugin() = *job_->plugin;  // checked again at every Join
  job_id_ = reply.job_id();
  remove_stale_leftovers();
  const std::string run = "node-" + name_;
  ring_name_ = buffer::own_segment_name(buffer::kRingSegment, run);
  // A staging ring: the node's credits plus two. Unrolls waiting here age
  // (the learner moves on while they wait), so the actors stop early when
  // the link or the learner is slow, instead of filling a learner-sized ring
  // with stale unrolls.
  const int64_t slots =
      std::clamp<int64_t>(reply.max_credits() + 2, 2, job_->config.learner.ring_slots);
  ring_ = buffer::Ring::create(ring_name_, job_->spec, static_cast<uint32_t>(slots));
  weights_ = std::make_unique<LocalWeights>(buffer::own_segment_name(buffer::kSlabSegment, run));
  dir_.emplace(temp_base());
  write_file_atomically(dir_->path() + "/config.toml", to_toml(job_->config), 0600);
}

void Node::joined(const v1::JoinReply& reply) {
  joined_ = true;
  incarnation_ = reply.incarnation();
  wanted_ = static_cast<int>(reply.processes());
  if (supervisor_) scale(wanted_);
  spdlog::info(
      "node {} joined job {} at {} (incarnation {}, session {}): {} actor processes, policy "
      "version {}, slots of {}",
      name_, job_id_, o_.learner, incarnation_, reply.session(), wanted_, reply.policy_version(),
      buffer::format_bytes(reply.slot_bytes()));
  receiver_ =
      std::make_unique<WeightsReceiver>(*stub_, o_.token, reply.session(), incarnation_, *weights_);
  uploader_ =
      std::make_unique<Uploader>(*stub_, SessionIds{o_.token, reply.session(), incarnation_},
                                 *ring_, *weights_, receiver_->ready_flag(), alive_);
}

// Runs the session until it ends or `stop`; true when the learner said the
// job ended. Leaves the session's counts in unsettled_.
bool Node::serve_session(const v1::JoinReply& reply) {
  std::optional<Clock::time_point> weights_ended;
  bool delivered = false;
  while (!stop_.load()) {
    tick();
    // Only a session that delivered starts back-off over: a node knocked
    // off again and again after joining slows down.
    if (!delivered && uploader_->acked() > 0) {
      delivered = true;
      backoff_.reset();
    }
    if (uploader_->ended()) break;
    if (receiver_->ended()) {
      if (!weights_ended) weights_ended = Clock::now();
      if (Clock::now() - *weights_ended > kStreamsEndGrace) break;
    }
    if (auto wanted = uploader_->wanted_processes()) {
      wanted_ = *wanted;
      if (supervisor_) scale(wanted_);
    }
    std::this_thread::sleep_for(50ms);
  }
  const Uploader::Result r = uploader_->finish();
  const grpc::Status weights = receiver_->finish();
  const std::string failure = receiver_->failure();
  uploader_.reset();
  receiver_.reset();
  tally_.discarded(r.discarded);
  unsettled_ = r;
  if (!failure.empty()) throw UsageError(failure);
  if (!stop_.load() && !r.job_ended) {
    spdlog::warn("node {}: session {} with {} ended ({}; weights: {}); joining again", name_,
                 reply.session(), o_.learner, r.status.ok() ? "closed" : r.status.error_message(),
                 weights.ok() ? "closed" : weights.error_message());
  }
  return r.job_ended;
}

// The node's loop between everything else: the actors start once the slab
// has weights, and are supervised and scaled from here only.
void Node::tick() {
  if (!ring_) return;
  if (!supervisor_ && weights_->has_weights()) {
    const std::vector<std::string> args =
        fleet::actor_process_args({.ring = ring_name_,
                                   .slab = weights_->slab_name(),
                                   .config_path = dir_->path() + "/config.toml",
                                   .parent = getpid(),
                                   .seed_rank = seed_rank(name_),
                                   // No learner here: "auto" leaves the actors as they are.
                                   .nice = fleet::actor_nice(job_->config.actor, false)});
    // No stall limit: a node cut off from its learner, or throttled by its
    // credits, commits nothing for as long as that lasts, and that is no fault.
    supervisor_.emplace(
        args, 0,
        fleet::SupervisorOptions{.program = o_.program,
                                 .limits = fleet::watchdog_limits(job_->config.actor,
                                                                  /*stall=*/false)});
    scale(wanted_);
  }
  if (supervisor_) {
    supervisor_->poll(ring_->counters().committed);
    alive_ = supervisor_->alive();
  }
}

void Node::scale(int processes) {
  if (processes == supervisor_->desired()) return;
  try {
    supervisor_->scale(processes, /*oversubscribe=*/false);
    spdlog::info("node {}: {} actor processes", name_, processes);
  } catch (const UsageError& e) {
    const int cap = fleet::actor_room(fleet::measure_machine_room(), supervisor_->alive(),
                                      fleet::kActorBytesGuess)
                        .cap();
    spdlog::warn("node {}: {}; running {}", name_, e.what(), cap);
    supervisor_->scale(std::min(processes, cap), true);
  }
}

// Every way out: actors stopped, streams ended, the tally logged, the ring,
// slab and config directory removed (by their destructors).
void Node::close() {
  if (closed_) return;
  closed_ = true;
  try {
    if (supervisor_) supervisor_->stop();
    supervisor_.reset();
    if (uploader_) {
      const Uploader::Result r = uploader_->finish();
      tally_.discarded(r.discarded);
      unsettled_ = r;
    }
    uploader_.reset();
    receiver_.reset();
    if (unsettled_) tally_.end_session(unsettled_->sent, unsettled_->acked, std::nullopt);
    unsettled_.reset();
    const buffer::RingCounters c = ring_ ? ring_->counters() : buffer::RingCounters{};
    // A node refused before anything happened says only why (its caller's line).
    if (joined_ || c.committed > 0) {
      spdlog::info("{}", tally_.line(name_, c.committed, c.ready));
      if (!tally_.adds_up(c.committed, c.ready)) {
        spdlog::warn("node {}: the unroll counts do not add up (a bug)", name_);
      }
    }
  } catch (const std::exception& e) {
    spdlog::error("node {}: while stopping: {}", name_, e.what());
  }
  ring_.reset();
  weights_.reset();
  dir_.reset();
}

}  // namespace

std::string node_name_from_host(std::string_view host) {
  std::string name(host.substr(0, kMaxNodeName));
  for (char& c : name) {
    const bool usable = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!usable) c = '-';
  }
  return name.empty() ? "node" : name;
}

NodeExit run_actor_node(const NodeOptions& options, const std::atomic<bool>& stop) {
  NodeOptions o = options;
  if (o.name.empty()) {
    const std::string host = host_name();
    PRONGHORN_CHECK(!host.empty(), "cannot read this host's name");
    o.name = node_name_from_host(host);
  }
  Node node(o, stop);
  return node.run();
}

}  // namespace pronghorn::remote
