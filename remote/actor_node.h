// An actor-only node (docs/architecture.md §2): `pronghorn actor --learner
// HOST:PORT` runs N ordinary actor processes on a machine with no learner
// and feeds their unrolls to the job's learner over gRPC (proto/remote.proto).
//
//   Join → the job's config (no config file on the node), session, slot size
//   local ring + slab (named after this process, like a learner's) ← N actors
//   uploader:  local ring → StreamUnrolls (one unroll per credit) → acks, credits, process count
//   receiver:  StreamWeights → whole, verified version → local slab
//
// Versions: the local slab numbers its versions 1, 2, …; the node keeps which
// learner version (and incarnation) each one is, so an unroll goes out
// stamped with the learner's version. Reconnects back off (0.5 s doubling to
// 10 s, from 0.5 s again only once a session had an unroll acked); after
// one, no unroll goes out before the new session's first
// complete weights have arrived, and unrolls acted with a previous learner
// incarnation's weights are discarded, never sent to the new one.
//
// Accounting, exact: every unroll committed to the local ring is acked by
// the learner, lost in flight at a disconnect (sent, never committed there:
// the rejoin's previous_session_received says how many were), discarded (a
// previous incarnation's), or left unsent at exit; the node logs the four
// at exit and they add up to the committed count.
//
// Files: node_session.h (channel, Join, the job's checks), node_weights.h
// (chunks → slab, the version map), node_uploader.h (ring → stream, the
// tally); actor_node.cpp wires them and supervises the actors.
//
// Ends: 0 on `stop` (SIGTERM/SIGINT) or when the learner says the job ended;
// 75 (kExitTransient) when no learner has answered for give_up_after_s;
// UsageError (exit 2) when refused (wrong token, version, plugin or spec),
// never retried, or when another node keeps the name for 15 s (ALREADY_EXISTS
// is tried again until then). Leaves no process or shared-memory segment
// behind.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <string_view>

namespace pronghorn::remote {

struct NodeOptions {
  std::string learner;  // HOST:PORT of the learner's remote.address
  std::string token;    // the job's
  std::string name;     // this node's; empty = the hostname (node_name_from_host)
  int processes = -1;   // actor processes; -1 = one per spare core (fleet/actor_capacity.h)
  std::string plugin;   // the env plugin's path here, when not the job's env.plugin path
  std::string python;   // a Python env's interpreter here, when not the job's env.python
  double give_up_after_s = 300;
  std::string tls_ca, tls_cert, tls_key;   // PEM files: TLS (and client certificate) when set
  std::string program = "/proc/self/exe";  // what the actor processes execute
  std::string version;                     // this build's (PRONGHORN_VERSION), sent at Join
};

// How the node ended: code 0 (stopped, or the job ended) or 75
// (kExitTransient: gave up), and the one line that says why.
struct NodeExit {
  int code = 0;
  std::string line;
};

// A node's name is 1 to kMaxNodeName of [A-Za-z0-9._-] (the learner
// refuses others); the default, the hostname, is made one: other characters
// become '-', it is cut to kMaxNodeName, and an empty one is "node".
constexpr size_t kMaxNodeName = 64;
std::string node_name_from_host(std::string_view host);

// Runs the node until it ends. Throws UsageError when refused (exit 2) and
// Error on a failure here (actors that keep crashing: exit 1).
NodeExit run_actor_node(const NodeOptions& options, const std::atomic<bool>& stop);

}  // namespace pronghorn::remote
