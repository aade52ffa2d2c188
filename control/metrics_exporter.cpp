#include "control/metrics_exporter.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace pronghorn::control {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

class StatusCollector final : public prometheus::Collectable {
 public:
  explicit StatusCollector(const ControlBoard& board) : board_(board) {}

  std::vector<MetricFamily> Collect() const override {
    const v1::Status s = board_.status();
    std::vector<MetricFamily> out;
    // One sample; its value goes where the family's type reads it. With
    // several learners every sample names its rank, so that their metrics
    // stay apart when one Prometheus scrapes them all.
    const std::string rank = s.world_size() > 1 ? std::to_string(s.rank()) : "";
    auto sample = [&rank](double value, std::vector<ClientMetric::Label> labels = {}) {
      ClientMetric m;
      m.label = std::move(labels);
      if (!rank.empty()) m.label.push_back({"rank", rank});
      m.counter.value = m.gauge.value = value;
      return m;
    };
    auto add = [&](const char* name, const char* help, MetricType type,
                   std::vector<ClientMetric> samples) {
      out.push_back({name, help, type, std::move(samples)});
    };
    auto counter = [&](const char* name, const char* help, double value) {
      add(name, help, MetricType::Counter, {sample(value)});
    };
    auto gauge = [&](const char* name, const char* help, double value) {
      add(name, help, MetricType::Gauge, {sample(value)});
    };
    add("pronghorn_info", "The run: name, env and config digest as labels; always 1.",
        MetricType::Gauge,
        {sample(
            1,
            {{"run", s.run_name()}, {"env", s.env_name()}, {"config_digest", s.config_digest()}})});
    gauge("pronghorn_uptime_seconds", "Seconds since this learner started training.", s.uptime_s());
    counter("pronghorn_env_steps_total", "Env steps trained on since the run began.",
            static_cast<double>(s.env_steps()));
    gauge("pronghorn_env_steps_per_second", "Trained env steps per second, last report interval.",
          s.sps());
    counter("pronghorn_learner_steps_total",
            "Learner steps (batches trained on) since the run began.",
            static_cast<double>(s.learner_steps()));
    gauge("pronghorn_learner_steps_per_second",
          "Learner steps (batches) per second, last report interval.", s.learner_steps_per_s());
    gauge("pronghorn_policy_version", "Version of the weights actors read.",
          static_cast<double>(s.policy_version()));
    counter("pronghorn_episodes_total", "Finished episodes since the run began.",
            static_cast<double>(s.episodes()));
    add("pronghorn_episode_return", "Return of the last (up to) 100 finished episodes.",
        MetricType::Gauge,
        {sample(s.episode_return().mean(), {{"stat", "mean"}}),
         sample(s.episode_return().min(), {{"stat", "min"}}),
         sample(s.episode_return().max(), {{"stat", "max"}})});
    gauge("pronghorn_episode_length_mean_steps", "Mean length of the last (up to) 100 episodes.",
          s.episode_length_mean());
    if (!s.episode_info().empty()) {  // env.episode_info, by key, in key order
      std::map<std::string, double> sorted(s.episode_info().begin(), s.episode_info().end());
      std::vector<ClientMetric> samples;
      for (const auto& [key, mean] : sorted) samples.push_back(sample(mean, {{"key", key}}));
      add("pronghorn_episode_info",
          "Mean of an env.episode_info number over the last (up to) 100 episodes that gave it.",
          MetricType::Gauge, std::move(samples));
    }
    if (s.eval_episodes() > 0) {  // none before the first evaluation
      add("pronghorn_eval_return", "Return of the last evaluation's greedy episodes.",
          MetricType::Gauge,
          {sample(s.eval_return_mean(), {{"stat", "mean"}}),
           sample(s.eval_return_std(), {{"stat", "std"}})});
      gauge("pronghorn_eval_episodes", "Episodes of the last evaluation.", s.eval_episodes());
      gauge("pronghorn_eval_env_steps",
            "Env steps trained on when the evaluated weights were taken.",
            static_cast<double>(s.eval_env_steps()));
    }
    // The job's state as one sample whose label names it (the Prometheus
    // way to export an enum), and whether status has a health line.
    if (!s.state().empty()) {
      add("pronghorn_state", "The job's state (running, stopping, finished) as a label; always 1.",
          MetricType::Gauge, {sample(1, {{"state", s.state()}})});
    }
    gauge("pronghorn_unhealthy",
          "1 while `pronghorn status` shows a health line (actors keep dying, env steps stopped).",
          s.health().empty() ? 0 : 1);
    gauge("pronghorn_total_steps", "Env steps after which the run stops (run.total_steps).",
          static_cast<double>(s.total_steps()));
    if (s.target_return() != 0) {
      gauge("pronghorn_target_return", "The return that ends the run solved (run.target_return).",
            s.target_return());
    }
    gauge("pronghorn_learning_rate", "The optimizer's learning rate, last learner step.",
          s.learning_rate());
    add("pronghorn_loss", "Loss terms of the last learner step.", MetricType::Gauge,
        {sample(s.loss().total(), {{"term", "total"}}),
         sample(s.loss().policy(), {{"term", "policy"}}),
         sample(s.loss().value(), {{"term", "value"}})});
    gauge("pronghorn_policy_entropy_nats", "Mean policy entropy, last learner step.",
          s.loss().entropy());
    gauge("pronghorn_clip_fraction",
          "Fraction of samples with |pi/mu - 1| > loss.ppo_clip, last batch.",
          s.loss().clip_fraction());
    gauge("pronghorn_approx_kl", "Mean of (r - 1) - log r, r = pi/mu, last batch.",
          s.loss().approx_kl());
    gauge("pronghorn_grad_norm", "Gradient norm before clipping, last learner step.",
          s.grad_norm());
    gauge("pronghorn_policy_lag_mean", "Policy versions between acting and learning, mean.",
          s.policy_lag_mean());
    gauge("pronghorn_policy_lag_max", "Policy versions between acting and learning, max.",
          static_cast<double>(s.policy_lag_max()));
    gauge("pronghorn_ring_slots", "Unroll slots in the shared-memory ring.", s.ring_slots());
    gauge("pronghorn_ring_occupancy_slots", "Ring slots holding a committed unroll not yet taken.",
          s.ring_occupancy());
    counter("pronghorn_unrolls_committed_total", "Unrolls committed by actors.",
            static_cast<double>(s.unrolls_committed()));
    counter("pronghorn_unrolls_consumed_total", "Unrolls trained on.",
            static_cast<double>(s.unrolls_consumed()));
    counter("pronghorn_unrolls_dropped_stale_total", "Unrolls dropped for policy lag.",
            static_cast<double>(s.unrolls_dropped_stale()));
    gauge("pronghorn_actors_alive", "Actor processes running.", s.actors_alive());
    gauge("pronghorn_actors_desired", "Actor processes the supervisor keeps.", s.actors_desired());
    counter("pronghorn_actor_restarts_total", "Dead actors restarted.",
            static_cast<double>(s.actor_restarts()));
    const v1::StageTimes& t = s.stage_time();
    add("pronghorn_stage_seconds_total",
        "Seconds spent per stage since this learner started (actors summed).", MetricType::Counter,
        {sample(t.actor_env_s(), {{"stage", "actor_env"}}),
         sample(t.actor_policy_s(), {{"stage", "actor_policy"}}),
         sample(t.actor_wait_s(), {{"stage", "actor_wait"}}),
         sample(t.learner_wait_s(), {{"stage", "learner_wait"}}),
         sample(t.learner_batch_s(), {{"stage", "learner_batch"}}),
         sample(t.learner_forward_s(), {{"stage", "learner_forward"}}),
         sample(t.learner_backward_s(), {{"stage", "learner_backward"}}),
         sample(t.learner_optimizer_s(), {{"stage", "learner_optimizer"}}),
         sample(t.learner_publish_s(), {{"stage", "learner_publish"}}),
         sample(t.learner_allreduce_s(), {{"stage", "learner_allreduce"}})});
    if (s.world_size() > 1) {
      gauge("pronghorn_world_size", "Learners training this model together.", s.world_size());
      gauge("pronghorn_local_env_steps_total", "Env steps trained on this rank's own batches.",
            static_cast<double>(s.local_env_steps()));
      gauge("pronghorn_allreduce_seconds", "The last step's gradient all-reduce.", s.allreduce_s());
    }
    // Rank 0: every rank's row, labelled by the rank it describes.
    auto per_rank = [&](const char* name, const char* help, auto value) {
      std::vector<ClientMetric> samples;
      for (const v1::RankStatus& r : s.ranks()) {
        ClientMetric m;
        m.label = {{"rank", std::to_string(r.rank())}, {"node", r.node_name()}};
        m.gauge.value = static_cast<double>(value(r));
        samples.push_back(std::move(m));
      }
      if (!samples.empty()) add(name, help, MetricType::Gauge, std::move(samples));
    };
    per_rank("pronghorn_rank_env_steps_per_second", "Each rank's trained env steps per second.",
             [](const v1::RankStatus& r) { return r.sps(); });
    per_rank("pronghorn_rank_actors_alive", "Each rank's actor processes running.",
             [](const v1::RankStatus& r) { return r.actors_alive(); });
    per_rank("pronghorn_rank_ring_occupancy_slots", "Each rank's committed unrolls not yet taken.",
             [](const v1::RankStatus& r) { return r.ring_occupancy(); });
    per_rank("pronghorn_rank_allreduce_seconds", "Each rank's last gradient all-reduce.",
             [](const v1::RankStatus& r) { return r.allreduce_s(); });
    // Actor-only nodes joined to this learner, labelled by node name.
    auto per_node = [&](const char* name, const char* help, MetricType type, auto value) {
      std::vector<ClientMetric> samples;
      for (const v1::RemoteNode& n : s.remote_nodes()) {
        samples.push_back(sample(static_cast<double>(value(n)), {{"remote_node", n.name()}}));
      }
      if (!samples.empty()) add(name, help, type, std::move(samples));
    };
    per_node("pronghorn_remote_node_unrolls_total", "Unrolls committed from each actor-only node.",
             MetricType::Counter, [](const v1::RemoteNode& n) { return n.unrolls(); });
    per_node("pronghorn_remote_node_connected", "1 while the node's unroll stream is open.",
             MetricType::Gauge, [](const v1::RemoteNode& n) { return n.connected() ? 1 : 0; });
    per_node("pronghorn_remote_node_processes_alive", "Actor processes each node runs.",
             MetricType::Gauge, [](const v1::RemoteNode& n) { return n.processes_alive(); });
    per_node("pronghorn_remote_node_disconnects_total",
             "Sessions of each node that ended before the job did.", MetricType::Counter,
             [](const v1::RemoteNode& n) { return n.disconnects(); });
    gauge("pronghorn_last_checkpoint_timestamp_seconds",
          "Unix time of the last checkpoint this learner wrote; 0 = none.",
          s.last_checkpoint_unix_s());
    return out;
  }

 private:
  const ControlBoard& board_;
};

// MHD closes a connection that has been idle (nothing read or written) this
// long; a keep-alive connection between scrapes is idle too. Not a deadline
// for the whole exchange: each byte a trickler sends restarts it.
constexpr unsigned kIdleTimeoutS = 2;
// Connections open at most; MHD leaves any more in the listen backlog until
// one closes.
constexpr unsigned kMaxConnections = 256;
// MHD's one thread's stack, which LibTorch's ~105 KB of static TLS shares; set
// here rather than left to the default (ulimit -s), so the environment cannot shrink it.
constexpr size_t kThreadStackBytes = size_t{1} << 20;

// MHD's access handler, on its thread, called once a request head is in:
// GET /metrics → the metrics, any other path → 404, any other method → 405.
// `url` has no query string. A request body, if any, is not read.
MHD_Result answer(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/,
                  size_t* /*upload_data_size*/, void** /*con_cls*/) {
  const auto& collector = *static_cast<const StatusCollector*>(cls);
  unsigned status = MHD_HTTP_OK;
  std::string type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0) {
    status = MHD_HTTP_METHOD_NOT_ALLOWED, type = "text/plain", body = "GET only\n";
  } else if (std::strcmp(url, "/metrics") != 0) {
    status = MHD_HTTP_NOT_FOUND, type = "text/plain", body = "see /metrics\n";
  } else {
    body = prometheus::TextSerializer().Serialize(collector.Collect());
  }
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // out of memory: MHD drops the connection
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type.c_str());
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, MHD_HTTP_METHOD_GET);
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);  // MHD holds its own reference until sent
  return queued;
}

}  // namespace

struct MetricsExporter::Impl {
  explicit Impl(const ControlBoard& board) : collector(board) {}
  StatusCollector collector;
  // Declared after the collector, so stopped (its thread joined) before it goes.
  std::unique_ptr<MHD_Daemon, decltype(&MHD_stop_daemon)> daemon{nullptr, &MHD_stop_daemon};
  int port = 0;
};

MetricsExporter::MetricsExporter(const std::string& host, int port, const ControlBoard& board)
    : impl_(std::make_unique<Impl>(board)) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  PRONGHORN_CHECK(inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1,
                  "server.metrics_address = \"", host, "\": expected an IPv4 address");
  address.sin_port = htons(static_cast<uint16_t>(port));
  // No MHD_USE_ERROR_LOG: a failure to start is the Error below, logged where
  // it is caught; MHD_OPTION_LISTENING_ADDRESS_REUSE left at 0: SO_REUSEADDR
  // only, no SO_REUSEPORT, so a port another socket listens on is refused.
  errno = 0;
  impl_->daemon.reset(MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC, 0, nullptr, nullptr, &answer, &impl_->collector,
      MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&address), MHD_OPTION_CONNECTION_TIMEOUT,
      kIdleTimeoutS, MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, MHD_OPTION_THREAD_STACK_SIZE,
      kThreadStackBytes, MHD_OPTION_END));
  if (impl_->daemon == nullptr) {
    // MHD returns no reason; errno is still the failed call's (bind's
    // EADDRINUSE for a busy port, checked by PortInUseIsOneClearError).
    const std::string reason = errno != 0 ? std::strerror(errno) : "MHD_start_daemon failed";
    throw Error(
        fmt::format("server.metrics_port = {}: cannot listen on {} there ({}; another job on that "
                    "port? 0 picks a free one, -1 turns metrics off)",
                    port, host, reason));
  }
  const MHD_DaemonInfo* bound = MHD_get_daemon_info(impl_->daemon.get(), MHD_DAEMON_INFO_BIND_PORT);
  PRONGHORN_CHECK(bound != nullptr && bound->port != 0, "server.metrics_port = ", port,
                  ": libmicrohttpd did not report the port it bound");
  impl_->port = bound->port;
}

MetricsExporter::~MetricsExporter() = default;

int MetricsExporter::port() const { return impl_->port; }

}  // namespace pronghorn::control
