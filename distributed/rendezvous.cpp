#include "distributed/rendezvous.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/error.h"
#include "core/token.h"
#include "distributed/collective.h"
#include "distributed/facts.h"
#include "distributed/hmac.h"

namespace pronghorn::distributed {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

double seconds(std::chrono::milliseconds ms) { return ms.count() / 1000.0; }

// The verdicts rank 0 publishes: "ok", or the kind of failure and its line.
constexpr std::string_view kOk = "ok";
constexpr std::string_view kUsage = "usage:";
constexpr std::string_view kLost = "lost:";

[[noreturn]] void throw_verdict(const std::string& verdict) {
  if (verdict.starts_with(kLost)) throw PeerLost(verdict.substr(kLost.size()));
  throw UsageError(verdict.substr(verdict.starts_with(kUsage) ? kUsage.size() : 0));
}

// The options a detached thread keeps: no callbacks, which may capture the
// caller's locals.
RendezvousOptions connection_only(RendezvousOptions o) {
  o.token = nullptr;
  o.on_listening = nullptr;
  return o;
}

c10::intrusive_ptr<c10d::Store> connect(const RendezvousOptions& o, bool server,
                                        std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(o.port);
  opts.isServer = server;
  opts.waitWorkers = false;
  opts.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(server ? std::string("127.0.0.1") : o.host, opts);
  } catch (const std::exception& e) {
    if (server) {
      throw UsageError(
          fmt::format("rank 0 cannot host the rendezvous store on port {}: {}", o.port, e.what()));
    }
    throw PeerLost(
        fmt::format("rank {}: rank 0's store at {}:{} did not answer within {:.0f} s ({})", o.rank,
                    o.host, o.port, seconds(timeout), e.what()));
  }
}

}  // namespace

Rendezvous::Rendezvous(const RendezvousOptions& options) : o_(options) {
  const auto start = Clock::now();
  root_ = connect(o_, o_.rank == 0, o_.rendezvous_timeout);
  if (o_.rank == 0) {
    o_.port = port();
    if (o_.on_listening) o_.on_listening(o_.port);
  }
  const std::string run_key = "pronghorn/" + o_.run_name + "/incarnation";
  if (o_.rank == 0) {
    incarnation_ = random_hex(8);
    job_ = c10::make_intrusive<c10d::PrefixStore>("pronghorn/" + o_.run_name + "/" + incarnation_,
                                                  root_);
    job_->set("nonce/0", bytes(random_hex(16)));
    root_->set(run_key, bytes(incarnation_));  // last: the others start once it is there
  } else {
    const auto left = o_.rendezvous_timeout -
                      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    try {
      root_->wait({run_key}, std::max(left, std::chrono::milliseconds(1)));
      incarnation_ = text(root_->get(run_key));
    } catch (const std::exception& e) {
      throw PeerLost(
          fmt::format("rank {}: rank 0 at {}:{} did not start run {} within {:.0f} s (distributed."
                      "rendezvous_timeout_s)",
                      o_.rank, o_.host, o_.port, o_.run_name, seconds(o_.rendezvous_timeout)));
    }
    job_ = c10::make_intrusive<c10d::PrefixStore>("pronghorn/" + o_.run_name + "/" + incarnation_,
                                                  root_);
  }
  token_ = o_.token();
  handshake();
  start_heartbeat();
  // From here on a store read waits distributed.timeout_s, not the
  // rendezvous's patience (every wait names its own timeout; a read after
  // it also resets the socket's to the store's).
  root_->setTimeout(o_.timeout);
}

int Rendezvous::port() const { return static_cast<c10d::TCPStore*>(root_.get())->getPort(); }

void Rendezvous::set(const std::string& key, const std::string& value) {
  try {
    job_->set(key, bytes(value));
  } catch (const std::exception& e) {
    throw PeerLost(fmt::format("rank {}: the rendezvous store at {}:{} failed writing {}: {}",
                               o_.rank, o_.host, o_.port, key, e.what()));
  }
}

std::string Rendezvous::get(const std::string& key, std::chrono::milliseconds timeout) {
  try {
    job_->wait({key}, timeout);
    return text(job_->get(key));
  } catch (const std::exception& e) {
    std::string cause = e.what();
    cause.resize(std::min(cause.find('\n'), cause.size()));  // c10::Error adds a backtrace
    throw PeerLost(
        fmt::format("rank {}: {} did not come from the rendezvous store at {}:{} within "
                    "{:.0f} s ({})",
                    o_.rank, key, o_.host, o_.port, seconds(timeout), cause));
  }
}

void Rendezvous::publish(const std::string& name, const std::string& value) {
  set(fmt::format("rank/{}/{}", o_.rank, name), value);
}

std::string Rendezvous::read(int rank, const std::string& name) {
  return get(fmt::format("rank/{}/{}", rank, name), o_.timeout);
}

c10::intrusive_ptr<c10d::Store> Rendezvous::prefixed(const std::string& sub) const {
  return c10::make_intrusive<c10d::PrefixStore>(sub, job_);
}

// See the header: both sides prove the token, then rank 0 publishes one
// verdict for all.
void Rendezvous::handshake() {
  const std::string claim = fmt::format("claim/{}", o_.rank);
  if (job_->add(claim, 1) != 1) {
    throw UsageError(
        fmt::format("rank {} of run {} is already taken by another process; give each "
                    "process its own distributed.rank",
                    o_.rank, o_.run_name));
  }
  const auto prove = [&](int who, const std::string& nonce) {
    return hmac_sha256_hex(token_,
                           fmt::format("pronghorn rank {} of {} {}", who, incarnation_, nonce));
  };
  if (o_.rank == 0) {
    const std::string nonce0 = text(job_->get("nonce/0"));
    std::string verdict(kOk);
    const auto deadline = Clock::now() + o_.rendezvous_timeout;
    for (int r = 1; r < o_.world_size && verdict == kOk; ++r) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      const std::string proof_key = fmt::format("proof/{}", r);
      try {
        job_->wait({proof_key}, std::max(left, std::chrono::milliseconds(1)));
      } catch (const std::exception&) {
        verdict = fmt::format(
            "{}rank {} did not join within {:.0f} s (distributed.rendezvous_timeout_s; "
            "rendezvous at {}:{})",
            kLost, r, seconds(o_.rendezvous_timeout), o_.host, o_.port);
        break;
      }
      if (!tokens_equal(text(job_->get(proof_key)), prove(r, nonce0))) {
        verdict = fmt::format(
            "{}rank {}: its token differs from rank 0's; every rank needs the job's token "
            "(server.token_file, PRONGHORN_TOKEN, or the shared run directory's token)",
            kUsage, r);
        break;
      }
      job_->set(fmt::format("proof0/{}", r),
                bytes(prove(0, text(job_->get(fmt::format("nonce/{}", r))))));
    }
    publish_verdict("handshake", verdict);
    return;
  }
  const std::string nonce = random_hex(16);
  job_->set(fmt::format("nonce/{}", o_.rank), bytes(nonce));
  job_->set(fmt::format("proof/{}", o_.rank), bytes(prove(o_.rank, text(job_->get("nonce/0")))));
  read_verdict("handshake", o_.rendezvous_timeout);
  if (!tokens_equal(get(fmt::format("proof0/{}", o_.rank), o_.timeout), prove(0, nonce))) {
    throw UsageError(fmt::format(
        "rank {}: the rendezvous at {}:{} could not prove it holds this job's token: it is not "
        "this job's rank 0, or the tokens differ",
        o_.rank, o_.host, o_.port));
  }
}

void Rendezvous::agree(const Facts& facts) {
  set(fmt::format("facts/{}", o_.rank), serialize(facts));
  if (o_.rank != 0) {
    read_verdict("agree", o_.rendezvous_timeout);
    return;
  }
  std::string verdict(kOk);
  for (int r = 1; r < o_.world_size && verdict == kOk; ++r) {
    const std::string difference =
        first_difference(facts, deserialize(get(fmt::format("facts/{}", r), o_.timeout)), r);
    if (!difference.empty()) verdict = std::string(kUsage) + difference;
  }
  publish_verdict("agree", verdict);
}

// Rank 0. A refusal waits (briefly) until every rank has read it: rank 0's
// exit takes the store away, and a rank that had not read the verdict yet
// would report a lost store instead of the reason.
void Rendezvous::publish_verdict(const std::string& stage, const std::string& verdict) {
  job_->set("verdict/" + stage, bytes(verdict));
  if (verdict == kOk) return;
  const auto deadline = Clock::now() + std::min(o_.timeout, std::chrono::milliseconds(3'000));
  for (int r = 1; r < o_.world_size; ++r) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    try {
      job_->wait({fmt::format("read/{}/{}", stage, r)}, left);
    } catch (const std::exception&) {
      break;  // a rank that never came: nothing to wait for
    }
  }
  throw_verdict(verdict);
}

// Ranks > 0: rank 0's verdict, acknowledged; throws unless it is "ok".
void Rendezvous::read_verdict(const std::string& stage, std::chrono::milliseconds timeout) {
  const std::string verdict = get("verdict/" + stage, timeout);
  if (verdict == kOk) return;
  try {
    job_->set(fmt::format("read/{}/{}", stage, o_.rank), bytes("1"));
  } catch (const std::exception&) {
    // Rank 0 gone already: the verdict is in hand.
  }
  throw_verdict(verdict);
}

// Its own connection: the main one may sit in a long wait. Detached rather
// than joined when it does not end soon (a stopped rank 0 holds its store
// call): the deadline of a lost peer must hold.
void Rendezvous::start_heartbeat() {
  heartbeat_ = std::make_shared<Heartbeat>();
  std::thread([o = connection_only(o_), incarnation = incarnation_, state = heartbeat_] {
    try {
      auto store = connect(o, false, o.timeout);
      c10d::PrefixStore job("pronghorn/" + o.run_name + "/" + incarnation, store);
      const std::string key = fmt::format("beat/{}", o.rank);
      while (!state->stop.load()) {
        job.add(key, 1);
        for (int i = 0; i < 10 && !state->stop.load(); ++i) std::this_thread::sleep_for(100ms);
      }
    } catch (const std::exception& e) {
      // Rank 0 gone: the collectives notice and name it; nothing to do here.
      spdlog::debug("rendezvous heartbeat stopped: {}", e.what());
    }
    state->done.set_value();
  }).detach();
}

Rendezvous::~Rendezvous() {
  if (!heartbeat_) return;
  heartbeat_->stop = true;
  heartbeat_->done.get_future().wait_for(500ms);
}

// On a connection of its own, in a thread of its own, bounded: the store may
// be the thing that was lost.
namespace {

// A failure report as stored: "<exit code>\t<line>".
std::optional<PeerFailure> parse_failure(int rank, const std::string& stored) {
  const size_t tab = stored.find('\t');
  if (tab == std::string::npos) return std::nullopt;
  try {
    return PeerFailure{rank, std::stoi(stored.substr(0, tab)), stored.substr(tab + 1)};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::string Rendezvous::lost_peers() {
  struct Finding {
    std::string names;
    std::optional<PeerFailure> failure;
  };
  auto answer = std::make_shared<std::promise<Finding>>();
  std::future<Finding> found = answer->get_future();
  std::thread([o = connection_only(o_), incarnation = incarnation_, answer] {
    Finding f;
    try {
      auto store = connect(o, false, 1s);
      c10d::PrefixStore job("pronghorn/" + o.run_name + "/" + incarnation, store);
      // A rank that left on an error of its own said so (report_failure).
      for (int r = 0; r < o.world_size && !f.failure; ++r) {
        const std::string key = fmt::format("failed/{}", r);
        if (r == o.rank || !job.check({key})) continue;
        f.failure = parse_failure(r, text(job.get(key)));
        job.set(fmt::format("read/failed/{}/{}", r, o.rank), bytes("1"));
      }
      if (f.failure) {
        f.names = fmt::format("rank {}, which failed: {}", f.failure->rank, f.failure->line);
        answer->set_value(f);
        return;
      }
      std::vector<int64_t> before(o.world_size);
      for (int r = 0; r < o.world_size; ++r) before[r] = job.add(fmt::format("beat/{}", r), 0);
      std::this_thread::sleep_for(2000ms);  // two beats
      std::vector<int> quiet;
      for (int r = 0; r < o.world_size; ++r) {
        if (r != o.rank && job.add(fmt::format("beat/{}", r), 0) == before[r]) quiet.push_back(r);
      }
      f.names = quiet.empty()
                    ? "a peer"
                    : fmt::format("rank{} {}", quiet.size() > 1 ? "s" : "", fmt::join(quiet, ", "));
    } catch (const std::exception&) {
      f.names = o.rank == 0 ? "a peer" : "rank 0 (its rendezvous store does not answer)";
    }
    answer->set_value(f);
  }).detach();
  // Bounded: a stopped rank 0's kernel still accepts connections, and 1.13's
  // TCPStore reads on them without a timeout.
  if (found.wait_for(3500ms) != std::future_status::ready) {
    return o_.rank == 0 ? "a peer" : "rank 0 (its rendezvous store does not answer)";
  }
  Finding f = found.get();
  if (f.failure) peer_failure_ = f.failure;
  return f.names;
}

// Bounded like lost_peers(), on a connection of its own.
void Rendezvous::report_failure(int exit_code, const std::string& line) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> written = done->get_future();
  std::thread([o = connection_only(o_), incarnation = incarnation_, done, exit_code, line] {
    try {
      auto store = connect(o, false, 1s);
      c10d::PrefixStore job("pronghorn/" + o.run_name + "/" + incarnation, store);
      job.set(fmt::format("failed/{}", o.rank), bytes(fmt::format("{}\t{}", exit_code, line)));
    } catch (const std::exception&) {
      // The store is gone: the others will say they lost this rank.
    }
    done->set_value();
  }).detach();
  written.wait_for(1500ms);
}

void Rendezvous::wait_failure_read() {
  if (o_.rank != 0) return;
  const auto deadline = Clock::now() + 5s;
  try {
    for (int r = 1; r < o_.world_size; ++r) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      job_->wait({fmt::format("read/failed/0/{}", r)}, left);
    }
  } catch (const std::exception&) {
    // A rank that never reads it ends on its own deadline, naming rank 0.
  }
}

}  // namespace pronghorn::distributed
