// The node's way in (remote/actor_node.h): the channel to the learner, Join
// with back-off, and what a JoinReply must satisfy before any actor runs.
//
//   make_channel      TLS when --tls-ca (client certificate when given), keepalives, limits
//   Backoff           0.5 s doubling to 10 s, each wait jittered
//   join_learner      Join until answered, refused (UsageError) or given up
//   read_job          JoinReply → the job's config, unroll spec and plugin, checked here
//   NodeDir           the private directory of the config the actors read
//
// Threads: the node's loop.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "buffer/unroll_spec.h"
#include "core/config.h"
#include "proto/remote.grpc.pb.h"
#include "remote/actor_node.h"

namespace pronghorn::remote {

// Throws UsageError naming the option when a TLS file cannot be read.
std::shared_ptr<grpc::Channel> make_channel(const NodeOptions& options);

class Backoff {
 public:
  using Duration = std::chrono::milliseconds;
  static constexpr Duration kFirst{500};
  static constexpr Duration kMax{10'000};

  explicit Backoff(uint64_t seed) : random_(seed) {}
  // The next wait: the base (kFirst, doubling up to kMax) times a random
  // factor in [0.75, 1.25), so nodes cut off together do not return together.
  Duration next();
  void reset() { base_ = kFirst; }

 private:
  Duration base_ = kFirst;
  std::mt19937_64 random_;
};

// Why join_learner returned no reply.
enum class JoinEnd { kJoined, kGaveUp, kStopped };

struct JoinCall {
  std::string learner, token;
  double give_up_after_s = 300;
  std::chrono::milliseconds deadline{10'000};  // of each call
  // How long ALREADY_EXISTS is retried: the learner has not yet noticed a
  // dead predecessor of this name (its keepalive takes ~5 s), or another
  // live node has the name.
  std::chrono::milliseconds duplicate_patience{15'000};
};

// Calls Join until the learner answers: the reply. A refusal
// (UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION,
// INVALID_ARGUMENT) throws UsageError "learner HOST:PORT refused this
// node: <its message>" at once. ALREADY_EXISTS is tried again like the rest
// until duplicate_patience has passed since the first, then throws
// UsageError naming the name and saying to pass another --name. Anything
// else is tried again after backoff.next(), until give_up_after_s have
// passed since the call (kGaveUp) or `stop` is set (kStopped).
// `back_off_first`: wait once before the first call (a reconnect). `tick`
// runs at least every 100 ms while waiting.
JoinEnd join_learner(v1::ActorGateway::Stub& stub, const JoinCall& call,
                     const v1::JoinRequest& request, Backoff& backoff, bool back_off_first,
                     const std::atomic<bool>& stop, const std::function<void()>& tick,
                     v1::JoinReply& reply);

// What a node needs of the job it joined.
struct NodeJob {
  Config config;  // the learner's, env.plugin the path here
  buffer::UnrollSpec spec;
  uint64_t spec_hash = 0, slot_bytes = 0;
  std::optional<v1::PluginIdentity> plugin;  // the file this node loads, when the job has one
};

// The job `reply` describes, as this node sees it: the config parsed, the
// env plugin (`plugin_path` when given, else the job's path) checked against
// the job's, a Python env's interpreter `python` when given (else the job's
// env.python), the env made once and its unroll spec's hash and slot size
// equal to the reply's. Throws UsageError naming what differs.
NodeJob read_job(const v1::JoinReply& reply, const std::string& learner,
                 const std::string& plugin_path, const std::string& python = "");

// A private directory, removed with everything in it:
// BASE/<prefix><pid>-<start>-XXXXXX (mkdtemp's six characters), named after
// this process (its pid and start time, buffer/process.h) so that one a
// killed process left behind is known for dead by the next
// (remove_dead_node_dirs with the same prefix). A node's prefix is
// kNodeDirPrefix; `pronghorn bench actors` keeps its run directory in one too.
inline constexpr std::string_view kNodeDirPrefix = "pronghorn-node-";
class NodeDir {
 public:
  explicit NodeDir(const std::string& base, std::string_view prefix = kNodeDirPrefix);
  ~NodeDir();
  NodeDir(const NodeDir&) = delete;
  NodeDir& operator=(const NodeDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// $TMPDIR, else /tmp.
std::string temp_base();

// Removes the directories in `base` named like a NodeDir, owned by this
// user, whose process is certainly gone (buffer::process_gone); anything
// else (another user's, a live node's, a name not exactly ours) stays. The
// paths removed.
std::vector<std::string> remove_dead_node_dirs(const std::string& base,
                                               std::string_view prefix = kNodeDirPrefix);

}  // namespace pronghorn::remote
