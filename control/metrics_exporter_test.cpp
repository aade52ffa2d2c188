// MetricsExporter over real loopback sockets: what a scrape shows, that
// clients which never finish a request neither block scrapes nor shutdown,
// and how a busy port is reported. Every wait has a deadline; the suite
// takes a few seconds. Run: build/learner/learner_test --gtest_filter='Metrics*'
#include "control/metrics_exporter.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace pronghorn::control {

using learner::ControlBoard;
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

const std::string kLoopback = "127.0.0.1";

// A socket to `host`:`port`; connect, send and each receive give up after
// `timeout`. -1 when it cannot connect.
int connect_to(int port, milliseconds timeout, const char* host = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() too
  sockaddr_in address{};
  address.sin_family = AF_INET;
  inet_pton(AF_INET, host, &address.sin_addr);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Reply {
  int status = 0;  // 0: no complete answer within the deadline
  std::string body;
};

// GET `path`, reading until the server closes; the whole exchange gets 3 s.
Reply http_get(int port, const std::string& path) {
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  Reply reply;
  const int fd = connect_to(port, milliseconds(500));
  if (fd < 0) return reply;
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  std::string in;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    while (Clock::now() < deadline) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n == 0) {  // the whole answer is in
        const size_t end = in.find("\r\n\r\n");
        if (in.starts_with("HTTP/1.") && in.size() > 12 && end != std::string::npos) {
          reply.status = std::stoi(in.substr(9, 3));
          reply.body = in.substr(end + 4);
        }
        break;
      }
      if (n > 0) in.append(buffer, static_cast<size_t>(n));
      if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    }
  }
  close(fd);
  return reply;
}

// `count` connections to `port` that never finish a request: the even ones
// send one more byte of an endless request head every 0.5 s, the odd ones
// nothing. One the server closes is opened again at the next tick, so the
// pressure lasts until destruction (or 20 s, should a test hang).
class SlowClients {
 public:
  SlowClients(int port, int count) : port_(port), fds_(static_cast<size_t>(count), -1) {
    sent_.assign(fds_.size(), 0);
    thread_ = std::thread([this] { run(); });
  }
  ~SlowClients() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }

 private:
  void run() {
    static const std::string head = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    const auto give_up = Clock::now() + std::chrono::seconds(20);
    std::unique_lock lock(mutex_);
    while (!stop_ && Clock::now() < give_up) {
      for (size_t i = 0; i < fds_.size(); ++i) {
        int& fd = fds_[i];
        if (fd >= 0 && server_closed(fd)) {
          close(fd);
          fd = -1;
        }
        if (fd < 0) {
          fd = connect_to(port_, milliseconds(100));
          sent_[i] = 0;
        }
        if (fd < 0 || i % 2 == 1) continue;
        const char byte = sent_[i] < head.size() ? head[sent_[i]] : 'a';
        if (send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) ++sent_[i];
      }
      wake_.wait_for(lock, milliseconds(500), [this] { return stop_; });
    }
  }
  // The server answered or hung up (either ends this connection's hold).
  static bool server_closed(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }

  const int port_;
  std::vector<int> fds_;
  std::vector<size_t> sent_;  // bytes of the request head sent on each
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

class MetricsExporterTest : public ::testing::Test {
 protected:
  MetricsExporterTest() {
    v1::Status s;
    s.set_run_name("unit");
    s.set_env_name("CartPole-v1");
    s.set_env_steps(1234);
    s.set_policy_version(7);
    s.mutable_loss()->set_total(0.5);
    board_.publish(s);
  }
  ControlBoard board_;
};

TEST_F(MetricsExporterTest, ServesPublishedStatus) {
  MetricsExporter exporter(kLoopback, 0, board_);
  ASSERT_GT(exporter.port(), 0);
  const Reply metrics = http_get(exporter.port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\npronghorn_env_steps_total 1234\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("\npronghorn_policy_version 7\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("pronghorn_loss{term=\"total\"} 0.5\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("run=\"unit\""), std::string::npos);
  const Reply other = http_get(exporter.port(), "/nothing-here");
  EXPECT_EQ(other.status, 404);
  EXPECT_EQ(other.body.find("pronghorn_"), std::string::npos);
}

TEST_F(MetricsExporterTest, EvaluationAppearsOnceThereIsOne) {
  MetricsExporter exporter(kLoopback, 0, board_);
  EXPECT_EQ(http_get(exporter.port(), "/metrics").body.find("pronghorn_eval"), std::string::npos)
      << "no evaluation yet: no eval metrics";
  v1::Status s = board_.status();
  s.set_eval_return_mean(487.5);
  s.set_eval_return_std(12.25);
  s.set_eval_episodes(10);
  s.set_eval_env_steps(40960);
  board_.publish(s);
  const Reply metrics = http_get(exporter.port(), "/metrics");
  EXPECT_NE(metrics.body.find("pronghorn_eval_return{stat=\"mean\"} 487.5\n"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("pronghorn_eval_return{stat=\"std\"} 12.25\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\npronghorn_eval_episodes 10\n"), std::string::npos);
  EXPECT_NE(metrics.body.find("\npronghorn_eval_env_steps 40960\n"), std::string::npos);
}

TEST_F(MetricsExporterTest, StateHealthProgressAndLearningRateAreExported) {
  MetricsExporter exporter(kLoopback, 0, board_);
  const std::string before = http_get(exporter.port(), "/metrics").body;
  EXPECT_NE(before.find("\npronghorn_unhealthy 0\n"), std::string::npos) << before;
  EXPECT_EQ(before.find("pronghorn_target_return"), std::string::npos) << "no target: none shown";
  v1::Status s = board_.status();
  s.set_state("stopping");
  s.set_health("actors keep dying: 7 restarts in the last minute");
  s.set_total_steps(20000000);
  s.set_target_return(475);
  s.set_learning_rate(0.00075);
  board_.publish(s);
  const std::string body = http_get(exporter.port(), "/metrics").body;
  EXPECT_NE(body.find("\npronghorn_state{state=\"stopping\"} 1\n"), std::string::npos) << body;
  EXPECT_NE(body.find("\npronghorn_unhealthy 1\n"), std::string::npos);
  EXPECT_NE(body.find("\npronghorn_total_steps 20000000\n"), std::string::npos);
  EXPECT_NE(body.find("\npronghorn_target_return 475\n"), std::string::npos);
  EXPECT_NE(body.find("\npronghorn_learning_rate 0.00075\n"), std::string::npos);
}

TEST_F(MetricsExporterTest, SeveralLearnersLabelTheirRankAndRankZeroEveryRanksRow) {
  v1::Status s = board_.status();
  s.set_rank(0);
  s.set_world_size(2);
  s.set_local_env_steps(600);
  for (uint32_t r = 0; r < 2; ++r) {
    v1::RankStatus* row = s.add_ranks();
    row->set_rank(r);
    row->set_node_name(r == 0 ? "n1" : "n2");
    row->set_sps(1000.0 * (r + 1));
    row->set_actors_alive(r + 1);
  }
  board_.publish(s);
  MetricsExporter exporter(kLoopback, 0, board_);
  const std::string body = http_get(exporter.port(), "/metrics").body;
  EXPECT_NE(body.find("\npronghorn_env_steps_total{rank=\"0\"} 1234\n"), std::string::npos) << body;
  EXPECT_NE(body.find("\npronghorn_world_size{rank=\"0\"} 2\n"), std::string::npos) << body;
  EXPECT_NE(body.find("pronghorn_rank_env_steps_per_second{rank=\"1\",node=\"n2\"} 2000\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("pronghorn_rank_actors_alive{rank=\"0\",node=\"n1\"} 1\n"), std::string::npos)
      << body;
}

TEST_F(MetricsExporterTest, ActorOnlyNodesAreLabelledByName) {
  v1::Status s = board_.status();
  v1::RemoteNode* node = s.add_remote_nodes();
  node->set_name("box1");
  node->set_unrolls(42);
  node->set_connected(true);
  node->set_disconnects(3);
  board_.publish(s);
  MetricsExporter exporter(kLoopback, 0, board_);
  const std::string body = http_get(exporter.port(), "/metrics").body;
  EXPECT_NE(body.find("\npronghorn_remote_node_unrolls_total{remote_node=\"box1\"} 42\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("\npronghorn_remote_node_connected{remote_node=\"box1\"} 1\n"),
            std::string::npos);
  EXPECT_NE(body.find("\npronghorn_remote_node_disconnects_total{remote_node=\"box1\"} 3\n"),
            std::string::npos);
}

TEST_F(MetricsExporterTest, SlowClientsDoNotBlockScrapes) {
  MetricsExporter exporter(kLoopback, 0, board_);
  SlowClients slow(exporter.port(), 32);
  std::this_thread::sleep_for(milliseconds(1000));  // all connected, some mid-request
  // Ten scrapes spread over 3 s, longer than any request timeout the server may use.
  for (int i = 0; i < 10; ++i) {
    const auto start = Clock::now();
    const Reply reply = http_get(exporter.port(), "/metrics");
    ASSERT_EQ(reply.status, 200) << "scrape " << i << ": no answer after " << seconds_since(start)
                                 << " s";
    EXPECT_LT(seconds_since(start), 2.0) << "scrape " << i;
    EXPECT_NE(reply.body.find("pronghorn_env_steps_total 1234"), std::string::npos);
    std::this_thread::sleep_for(milliseconds(300));
  }
}

TEST_F(MetricsExporterTest, PortInUseIsOneClearError) {
  MetricsExporter first(kLoopback, 0, board_);
  const int port = first.port();
  const std::string expected = fmt::format(
      "server.metrics_port = {}: cannot listen on 127.0.0.1 there ({}; another job on that "
      "port? 0 picks a free one, -1 turns metrics off)",
      port, std::strerror(EADDRINUSE));
  try {
    MetricsExporter second(kLoopback, port, board_);
    FAIL() << "a second exporter listens on port " << port << " too";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), expected);
  }
  EXPECT_EQ(http_get(port, "/metrics").status, 200);  // the first one still serves

  // A port someone else listens on, without SO_REUSEPORT or SO_REUSEADDR.
  const int other = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(other, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  ASSERT_EQ(bind(other, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(listen(other, 4), 0);
  ASSERT_EQ(getsockname(other, reinterpret_cast<sockaddr*>(&address), &size), 0);
  const int taken = ntohs(address.sin_port);
  EXPECT_THROW(MetricsExporter(kLoopback, taken, board_), Error);
  close(other);
}

// server.metrics_address is where it listens: 127.0.0.2 (loopback too, so
// the test stays on this machine) is not 127.0.0.1; 0.0.0.0 is both.
TEST_F(MetricsExporterTest, ListensOnTheAddressItIsGiven) {
  const auto reachable = [](int port, const char* host) {
    const int fd = connect_to(port, milliseconds(500), host);
    if (fd >= 0) close(fd);
    return fd >= 0;
  };
  {
    MetricsExporter one("127.0.0.2", 0, board_);
    EXPECT_TRUE(reachable(one.port(), "127.0.0.2"));
    EXPECT_FALSE(reachable(one.port(), "127.0.0.1"));
  }
  MetricsExporter every("0.0.0.0", 0, board_);
  EXPECT_TRUE(reachable(every.port(), "127.0.0.2"));
  EXPECT_EQ(http_get(every.port(), "/metrics").status, 200);
  EXPECT_THROW(MetricsExporter("localhost", 0, board_), Error) << "not an IPv4 address";
}

TEST_F(MetricsExporterTest, StopsPromptlyWithSlowClientsConnected) {
  auto exporter = std::make_unique<MetricsExporter>(kLoopback, 0, board_);
  SlowClients slow(exporter->port(), 16);
  std::this_thread::sleep_for(milliseconds(1500));
  const auto start = Clock::now();
  exporter.reset();
  EXPECT_LT(seconds_since(start), 3.0);
}

}  // namespace
}  // namespace pronghorn::control
