#include "learner/metrics_exporter.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace pronghorn::learner {
namespace {

using Clock = std::chrono::steady_clock;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

class StatusCollector final : public prometheus::Collectable {
 public:
  explicit StatusCollector(const ControlBoard& board) : board_(board) {}

  std::vector<MetricFamily> Collect() const override {
    const v1::Status s = board_.status();
    std::vector<MetricFamily> out;
    // One sample; its value goes where the family's type reads it.
    auto sample = [](double value, std::vector<ClientMetric::Label> labels = {}) {
      ClientMetric m;
      m.label = std::move(labels);
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
    counter("pronghorn_learner_steps_total", "Optimizer steps since the run began.",
            static_cast<double>(s.learner_steps()));
    gauge("pronghorn_learner_steps_per_second", "Optimizer steps per second, last report interval.",
          s.learner_steps_per_s());
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
    add("pronghorn_loss", "Loss terms of the last learner step.", MetricType::Gauge,
        {sample(s.loss().total(), {{"term", "total"}}),
         sample(s.loss().policy(), {{"term", "policy"}}),
         sample(s.loss().value(), {{"term", "value"}})});
    gauge("pronghorn_policy_entropy_nats", "Mean policy entropy, last learner step.",
          s.loss().entropy());
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
         sample(t.learner_publish_s(), {{"stage", "learner_publish"}})});
    gauge("pronghorn_last_checkpoint_timestamp_seconds",
          "Unix time of the last checkpoint this learner wrote; 0 = none.",
          s.last_checkpoint_unix_s());
    return out;
  }

 private:
  const ControlBoard& board_;
};

// A connection is dropped once this long has passed since it was accepted,
// whether or not its request head has come in or its reply gone out: a
// client that trickles a byte a second is cut off like one that sends nothing.
constexpr auto kExchangeTimeout = std::chrono::seconds(2);
// Open connections at most; one more evicts the oldest (the nearest its
// deadline), so new clients are always read.
constexpr size_t kMaxConnections = 64;
// A request head longer than this is answered from what has come in.
constexpr size_t kMaxHead = 8192;

// The reply to one request head: GET /metrics → the metrics, any other path
// → 404, any other method → 405. The connection closes after it.
std::string reply_to(const std::string& head, const StatusCollector& collector) {
  const std::string line = head.substr(0, head.find("\r\n"));
  std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (!line.starts_with("GET ")) {
    status = "405 Method Not Allowed", type = "text/plain", body = "GET only\n";
  } else if (!line.starts_with("GET /metrics ") && !line.starts_with("GET /metrics?")) {
    status = "404 Not Found", type = "text/plain", body = "see /metrics\n";
  } else {
    body = prometheus::TextSerializer().Serialize(collector.Collect());
  }
  return fmt::format(
      "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      status, type, body.size(), body);
}

// One client: its request head coming in, then the reply going out. The
// socket does not block.
struct Connection {
  int fd = -1;
  Clock::time_point deadline;  // accepted + kExchangeTimeout
  std::string in, out;         // out: empty until the head is in
  size_t sent = 0;             // bytes of out sent
};

// Moves `c` along as far as its socket allows; false once it is finished
// (reply sent, client gone, or a socket error).
bool advance(Connection& c, const StatusCollector& collector) {
  if (c.out.empty()) {
    char buffer[2048];
    const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
    if (n < 0) return errno == EAGAIN || errno == EINTR;
    if (n == 0) return false;
    c.in.append(buffer, static_cast<size_t>(n));
    if (c.in.find("\r\n\r\n") == std::string::npos && c.in.size() < kMaxHead) return true;
    c.out = reply_to(c.in, collector);
  }
  const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  c.sent += static_cast<size_t>(n);
  return c.sent < c.out.size();
}

}  // namespace

struct MetricsExporter::Impl {
  explicit Impl(const ControlBoard& board) : collector(board) {}
  StatusCollector collector;
  int listener = -1, wake[2] = {-1, -1};  // wake: a pipe that ends the serving thread
  int port = 0;
  std::thread thread;

  // poll() over the listener, the wake pipe and every open connection.
  void serve() {
    std::deque<Connection> open;  // oldest first, so deadlines ascend
    std::vector<pollfd> fds;
    for (;;) {
      fds.assign({{listener, POLLIN, 0}, {wake[0], POLLIN, 0}});
      for (const Connection& c : open)
        fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
      int timeout_ms = -1;
      if (!open.empty()) {
        const auto left = open.front().deadline - Clock::now();
        timeout_ms = static_cast<int>(
            std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(left).count()));
      }
      if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
      if (fds[1].revents) break;
      const auto now = Clock::now();
      for (size_t i = 0; i < open.size(); ++i) {
        Connection& c = open[i];
        const bool done = (fds[i + 2].revents && !advance(c, collector)) || c.deadline <= now;
        if (done) close(std::exchange(c.fd, -1));
      }
      std::erase_if(open, [](const Connection& c) { return c.fd < 0; });
      if (!(fds[0].revents & POLLIN)) continue;
      // The listener does not block: a client gone before accept costs nothing.
      for (int fd; (fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;) {
        if (open.size() == kMaxConnections) {
          close(open.front().fd);
          open.pop_front();
        }
        open.push_back({fd, now + kExchangeTimeout, {}, {}, 0});
      }
    }
    for (const Connection& c : open) close(c.fd);
  }
};

MetricsExporter::MetricsExporter(int port, const ControlBoard& board)
    : impl_(std::make_unique<Impl>(board)) {
  const std::string key = fmt::format("server.metrics_port = {}", port);
  impl_->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  PRONGHORN_CHECK(impl_->listener >= 0, key, ": socket: ", std::strerror(errno));
  const int on = 1;
  setsockopt(impl_->listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t size = sizeof address;
  if (bind(impl_->listener, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
      listen(impl_->listener, 64) != 0 ||
      getsockname(impl_->listener, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    const int saved = errno;
    close(impl_->listener);
    throw Error(key + ": cannot listen on 127.0.0.1 there (" + std::strerror(saved) +
                "; another job on that port? 0 picks a free one, -1 turns metrics off)");
  }
  impl_->port = ntohs(address.sin_port);
  PRONGHORN_CHECK(pipe2(impl_->wake, O_CLOEXEC) == 0, "pipe: ", std::strerror(errno));
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

MetricsExporter::~MetricsExporter() {
  const char byte = 1;
  if (write(impl_->wake[1], &byte, 1) != 1) std::abort();  // the thread would never end
  impl_->thread.join();
  close(impl_->listener);
  close(impl_->wake[0]);
  close(impl_->wake[1]);
}

int MetricsExporter::port() const { return impl_->port; }

}  // namespace pronghorn::learner
