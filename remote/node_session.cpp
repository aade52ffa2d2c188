#include "remote/node_session.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <thread>

#include "actor/job_check.h"
#include "buffer/process.h"
#include "control/grpc_auth.h"
#include "core/error.h"
#include "core/files.h"
#include "remote/wire.h"

namespace pronghorn::remote {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

bool refusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAUTHENTICATED || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::FAILED_PRECONDITION ||
         code == grpc::StatusCode::INVALID_ARGUMENT;
}

// Waits `wait`, calling `tick` every 100 ms at most; false when `stop` was set.
bool wait_ticking(Clock::duration wait, const std::atomic<bool>& stop,
                  const std::function<void()>& tick) {
  const auto until = Clock::now() + wait;
  while (!stop.load()) {
    tick();
    const auto now = Clock::now();
    if (now >= until) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(until - now, 100ms));
  }
  return false;
}

std::string describe(const v1::PluginIdentity& p) {
  return fmt::format("{} (ABI {}, SHA-256 {})", p.file_name(), p.abi_version(), p.sha256());
}

}  // namespace

std::shared_ptr<grpc::Channel> make_channel(const NodeOptions& options) {
  grpc::ChannelArguments arguments;
  set_keepalive(arguments);
  arguments.SetMaxReceiveMessageSize(weights_message_limit());
  arguments.SetMaxSendMessageSize(-1);
  // gRPC's own reconnects back off to 120 s by default: a learner back after
  // a long cut would wait that long for the channel, whatever our Backoff.
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, Backoff::kFirst.count());
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, Backoff::kFirst.count());
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, Backoff::kMax.count());
  return grpc::CreateCustomChannel(
      options.learner,
      control::client_credentials(options.tls_ca, options.tls_cert, options.tls_key), arguments);
}

Backoff::Duration Backoff::next() {
  const double factor = std::uniform_real_distribution<double>(0.75, 1.25)(random_);
  const auto wait = Duration(static_cast<int64_t>(static_cast<double>(base_.count()) * factor));
  base_ = std::min(base_ * 2, kMax);
  return wait;
}

JoinEnd join_learner(v1::ActorGateway::Stub& stub, const JoinCall& call,
                     const v1::JoinRequest& request, Backoff& backoff, bool back_off_first,
                     const std::atomic<bool>& stop, const std::function<void()>& tick,
                     v1::JoinReply& reply) {
  const auto give_up_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(call.give_up_after_s));
  bool wait = back_off_first;
  std::optional<Clock::time_point> first_duplicate;
  for (;;) {
    if (wait) {
      const auto pause = std::min<Clock::duration>(backoff.next(), give_up_at - Clock::now());
      if (!wait_ticking(std::max<Clock::duration>(pause, 0ms), stop, tick)) {
        return JoinEnd::kStopped;
      }
    }
    wait = true;
    if (stop.load()) return JoinEnd::kStopped;
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + call.token);
    context.set_deadline(std::chrono::system_clock::now() + call.deadline);
    const grpc::Status status = stub.Join(&context, request, &reply);
    if (status.ok()) return JoinEnd::kJoined;
    if (refusal(status.error_code())) {
      throw UsageError(
          fmt::format("learner {} refused this node: {}", call.learner, status.error_message()));
    }
    if (status.error_code() == grpc::StatusCode::ALREADY_EXISTS) {
      if (!first_duplicate) first_duplicate = Clock::now();
      if (Clock::now() - *first_duplicate >= call.duplicate_patience) {
        throw UsageError(fmt::format(
            "learner {} refused this node for {:g} s: {}; another node is running as '{}': give "
            "this one another --name",
            call.learner, std::chrono::duration<double>(call.duplicate_patience).count(),
            status.error_message(), request.node_name()));
      }
      spdlog::info("join {}: {}; trying again", call.learner, status.error_message());
    }
    spdlog::debug("join {}: {} ({})", call.learner, status.error_message(),
                  static_cast<int>(status.error_code()));
    if (Clock::now() >= give_up_at) return JoinEnd::kGaveUp;
  }
}

NodeJob read_job(const v1::JoinReply& reply, const std::string& learner,
                 const std::string& plugin_path, const std::string& python) {
  NodeJob job;
  job.config = parse_config(reply.config_toml(), "the learner's config", {});
  if (!python.empty()) job.config.env.python = python;
  const bool job_has_plugin = reply.has_plugin() || !job.config.env.plugin.empty();
  if (job_has_plugin) {
    if (!plugin_path.empty()) job.config.env.plugin = plugin_path;
    const std::string& path = job.config.env.plugin;
    const std::string wanted =
        reply.has_plugin() ? describe(reply.plugin()) : std::string("the job's env plugin");
    if (path.empty() || !std::filesystem::is_regular_file(path)) {
      throw UsageError(fmt::format(
          "the job at {} loads the env plugin {}: no such file here at '{}'; copy it to this node "
          "(--plugin PATH)",
          learner, wanted, path));
    }
    job.plugin = plugin_identity(path);
    if (reply.has_plugin() && (job.plugin->sha256() != reply.plugin().sha256() ||
                               job.plugin->abi_version() != reply.plugin().abi_version())) {
      throw UsageError(fmt::format(
          "env plugin {} is {}, the job's at {} is {}: the node needs the same file (--plugin "
          "PATH)",
          path, describe(*job.plugin), learner, wanted));
    }
  } else if (!plugin_path.empty()) {
    // The learner refuses such a Join itself; this says the same should one not.
    throw UsageError(fmt::format(
        "--plugin {}: the job at {} loads no env plugin; start the node without --plugin",
        plugin_path, learner));
  }
  const EnvSpec env = actor::check_job_config(job.config);
  if (!reply.env_spaces().empty() && env.describe() != reply.env_spaces()) {
    throw UsageError(fmt::format("env {} on this node has {}; at the learner {} it has {}",
                                 env.name, env.describe(), learner, reply.env_spaces()));
  }
  const std::map<std::string, std::string> learners_packages(reply.env_packages().begin(),
                                                             reply.env_packages().end());
  if (const std::string why =
          package_difference(env.packages, learners_packages, "on this node", "at the learner");
      !why.empty()) {
    throw UsageError(fmt::format(
        "env {}: its packages differ: {}; install the learner's versions in this node's "
        "env.python (\"{}\")",
        env.name, why, job.config.env.python));
  }
  job.spec = buffer::unroll_spec_for(env, job.config);
  job.spec_hash = buffer::spec_hash(job.spec);
  job.slot_bytes = buffer::slot_layout(job.spec).bytes;
  if (job.spec_hash != reply.spec_hash() || job.slot_bytes != reply.slot_bytes()) {
    throw UsageError(fmt::format(
        "the job's config at {} gives this node unrolls of spec {:016x} in slots of {} bytes, the "
        "learner's are spec {:016x} in slots of {} bytes: the env differs here ({} on this node)",
        learner, job.spec_hash, job.slot_bytes, reply.spec_hash(), reply.slot_bytes(), env.name));
  }
  return job;
}

namespace {

// Digits only, no sign or leading zero, within `max`: the number; else nothing.
std::optional<uint64_t> strict_number(std::string_view digits, uint64_t max) {
  if (digits.empty() || digits.size() > 20 || digits[0] == '0') return std::nullopt;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n > max) return std::nullopt;
  return n;
}

struct DirOwner {
  int pid = 0;
  uint64_t start_time = 0;
};

// "<prefix><pid>-<start>-XXXXXX" (mkdtemp's six letters or digits) → its
// owner; anything else → nothing.
std::optional<DirOwner> dir_owner(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  const size_t a = name.find('-');
  if (a == std::string_view::npos) return std::nullopt;
  const size_t b = name.find('-', a + 1);
  if (b == std::string_view::npos) return std::nullopt;
  const std::string_view suffix = name.substr(b + 1);
  const bool suffix_ok =
      suffix.size() == 6 && std::all_of(suffix.begin(), suffix.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
      });
  const auto pid = strict_number(name.substr(0, a), std::numeric_limits<int>::max());
  const auto start =
      strict_number(name.substr(a + 1, b - a - 1), std::numeric_limits<uint64_t>::max());
  if (!suffix_ok || !pid || !start) return std::nullopt;
  return DirOwner{static_cast<int>(*pid), *start};
}

}  // namespace

NodeDir::NodeDir(const std::string& base, std::string_view prefix) {
  const int pid = getpid();
  std::string pattern =
      fmt::format("{}/{}{}-{}-XXXXXX", base, prefix, pid, buffer::process_start_time(pid));
  PRONGHORN_CHECK(mkdtemp(pattern.data()) != nullptr, "cannot make a directory like ", pattern);
  path_ = pattern;
}

NodeDir::~NodeDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string temp_base() {
  const char* base = std::getenv("TMPDIR");
  return base != nullptr && *base != 0 ? base : "/tmp";
}

std::vector<std::string> remove_dead_node_dirs(const std::string& base, std::string_view prefix) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    const std::optional<DirOwner> owner = dir_owner(entry.path().filename().string(), prefix);
    if (!owner) continue;
    struct stat st {};
    // lstat: a link named like ours is not ours, whatever it points at.
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      continue;
    }
    if (!buffer::process_gone(owner->pid, owner->start_time)) continue;
    std::error_code remove_error;
    std::filesystem::remove_all(entry.path(), remove_error);
    if (!remove_error) removed.push_back(entry.path().string());
  }
  return removed;
}

}  // namespace pronghorn::remote
