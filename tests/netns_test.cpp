// The two-namespace harness (tests/testing/netns.h) that multi-node tests run
// ranks in: traffic crosses the veth, cut() silences it without a reset,
// heal() restores it, nothing leaks to the root namespace and nothing is left
// behind, not even by a SIGKILLed test. Needs root; skipped otherwise.
#include "tests/testing/netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace pronghorn::testing {
namespace {

using Side = NetnsPair::Side;
using std::chrono::milliseconds;

constexpr int kPort = 7000;  // the namespaces are the test's own: no other listener

// Echoes every connection (one thread each) on argv[1]:argv[2].
constexpr const char* kEchoServer = R"(
import socket, sys, threading
def echo(c):
    while True:
        data = c.recv(4096)
        if not data:
            return
        c.sendall(data)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen()
while True:
    threading.Thread(target=echo, args=(s.accept()[0],), daemon=True).start()
)";

// Polls `ready` every 10 ms for up to 5 s; its last answer.
bool within_5s(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

#define SKIP_WITHOUT_NETNS() \
  if (const auto reason = NetnsPair::unavailable()) GTEST_SKIP() << *reason

// A TCP socket created inside the side's namespace (the root one for nullopt).
int tcp_socket(const NetnsPair& pair, std::optional<Side> side) {
  int fd = -1;
  const auto make = [&] { fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); };
  if (side) {
    pair.run_in(*side, make);
  } else {
    make();
  }
  return fd;
}

// A socket in the side's namespace listening on its address at kPort; the
// kernel completes handshakes from the backlog, so connects succeed unaccepted.
int listen_in(const NetnsPair& pair, Side side) {
  const int fd = tcp_socket(pair, side);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(kPort);
  inet_pton(AF_INET, pair.address(side).c_str(), &at.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 || listen(fd, 16) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Connects `fd` within `timeout`: 0, the socket's error, or ETIMEDOUT when the
// deadline passed with no answer at all (the kernel's own SYN timeout is minutes).
int connect_within(int fd, const std::string& address, milliseconds timeout) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(kPort);
  inet_pton(AF_INET, address.c_str(), &to.sin_addr);
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int error = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      error = poll(&p, 1, static_cast<int>(timeout.count())) == 1 ? 0 : ETIMEDOUT;
      socklen_t size = sizeof error;
      if (error == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    }
  }
  fcntl(fd, F_SETFL, flags);
  return error;
}

// A connection from `side` to the echo server in a, retried (the server may
// still be starting) for up to 10 s; -1 if none.
int connect_to_echo(const NetnsPair& pair, Side side) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const int fd = tcp_socket(pair, side);
    if (connect_within(fd, pair.address_a(), milliseconds(500)) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(milliseconds(50));
  }
  return -1;
}

// Reads exactly `size` bytes within `timeout`; fewer when it passes. `error`
// gets recv's errno (EAGAIN on the deadline) or ECONNRESET for an EOF.
std::string receive(int fd, size_t size, milliseconds timeout, int* error) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string got;
  *error = 0;
  while (got.size() < size) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *error = EAGAIN;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) != 1) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, std::min(sizeof buffer, size - got.size()), 0);
    if (n <= 0) {
      *error = n == 0 ? ECONNRESET : errno;
      break;
    }
    got.append(buffer, static_cast<size_t>(n));
  }
  return got;
}

bool echoes(int fd, const std::string& text) {
  if (send(fd, text.data(), text.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(text.size())) {
    return false;
  }
  int error = 0;
  return receive(fd, text.size(), std::chrono::seconds(5), &error) == text;
}

pid_t start_echo_server(const NetnsPair& pair, const std::string& log) {
  return pair.spawn_in(
      Side::a, {"python3", "-c", kEchoServer, pair.address_a(), std::to_string(kPort)}, log);
}

std::string log_path(const std::string& what) {
  return ::testing::TempDir() + "/netns-test-" + std::to_string(getpid()) + "-" + what + ".log";
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(NetnsTest, ClientInBEchoesThroughServerInA) {
  SKIP_WITHOUT_NETNS();
  NetnsPair pair;
  EXPECT_NE(pair.address_a(), pair.address_b());
  start_echo_server(pair, log_path("echo"));
  const int fd = connect_to_echo(pair, Side::b);
  ASSERT_GE(fd, 0) << "no connection from b to the echo server in a: "
                   << file_text(log_path("echo"));
  EXPECT_TRUE(echoes(fd, "hello across the veth"));
  sockaddr_in local{};
  socklen_t size = sizeof local;
  getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size);
  EXPECT_EQ(inet_ntoa(local.sin_addr), pair.address_b()) << "the client is not in b";
  close(fd);
}

TEST(NetnsTest, CutSilencesAnEstablishedConnectionWithoutResetAndHealRestoresIt) {
  SKIP_WITHOUT_NETNS();
  NetnsPair pair;
  start_echo_server(pair, log_path("cut"));
  const int fd = connect_to_echo(pair, Side::b);
  ASSERT_GE(fd, 0) << file_text(log_path("cut"));
  ASSERT_TRUE(echoes(fd, "before"));
  const int listener = listen_in(pair, Side::b);  // for connects from a to b
  ASSERT_GE(listener, 0) << std::strerror(errno);
  const int a_to_b = tcp_socket(pair, Side::a);
  ASSERT_EQ(connect_within(a_to_b, pair.address_b(), std::chrono::seconds(5)), 0);
  close(a_to_b);

  pair.cut();
  pair.cut();  // idempotent
  const std::string during = "during the cut";
  ASSERT_EQ(send(fd, during.data(), during.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(during.size()))
      << "a send into the buffer must not fail: " << std::strerror(errno);
  int error = 0;
  EXPECT_EQ(receive(fd, during.size(), std::chrono::seconds(1), &error), "");
  EXPECT_EQ(error, EAGAIN) << "silence expected, got " << std::strerror(error);
  socklen_t size = sizeof error;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
  EXPECT_EQ(error, 0) << "the connection saw an error: " << std::strerror(error);
  for (const Side from : {Side::b, Side::a}) {  // both directions
    const int fresh = tcp_socket(pair, from);
    const std::string& to = pair.address(from == Side::a ? Side::b : Side::a);
    const int result = connect_within(fresh, to, std::chrono::seconds(1));
    EXPECT_EQ(result, ETIMEDOUT) << "a new connect to " << to
                                 << " must go unanswered, not fail with: " << std::strerror(result);
    close(fresh);
  }

  pair.heal();
  pair.heal();  // idempotent
  const int after = connect_to_echo(pair, Side::b);
  ASSERT_GE(after, 0) << "no new connection after heal";
  EXPECT_TRUE(echoes(after, "after"));
  close(after);
  // TCP retransmits what the cut swallowed: the old connection resumes.
  EXPECT_EQ(receive(fd, during.size(), std::chrono::seconds(15), &error), during)
      << std::strerror(error);
  close(fd);
  close(listener);
}

// Whether a datagram sent from `from` reaches a socket bound in the other
// side within 300 ms (UDP: a one-way cut shows, unlike with TCP's handshake).
bool datagram_arrives(const NetnsPair& pair, Side from) {
  const Side to = from == Side::a ? Side::b : Side::a;
  int sender = -1, receiver = -1;
  pair.run_in(from, [&] { sender = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); });
  pair.run_in(to, [&] { receiver = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); });
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(kPort);
  inet_pton(AF_INET, pair.address(to).c_str(), &at.sin_addr);
  bool arrived = false;
  if (bind(receiver, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0) {
    sendto(sender, "x", 1, 0, reinterpret_cast<sockaddr*>(&at), sizeof at);
    pollfd p{receiver, POLLIN, 0};
    arrived = poll(&p, 1, 300) == 1;
  }
  close(sender);
  close(receiver);
  return arrived;
}

TEST(NetnsTest, CutDropsDatagramsBothWaysAndHealPassesThem) {
  SKIP_WITHOUT_NETNS();
  NetnsPair pair;
  EXPECT_TRUE(datagram_arrives(pair, Side::a));
  EXPECT_TRUE(datagram_arrives(pair, Side::b));
  pair.cut();
  EXPECT_FALSE(datagram_arrives(pair, Side::a)) << "a to b passes the cut";
  EXPECT_FALSE(datagram_arrives(pair, Side::b)) << "b to a passes the cut";
  pair.heal();
  EXPECT_TRUE(datagram_arrives(pair, Side::a));
  EXPECT_TRUE(datagram_arrives(pair, Side::b));
}

TEST(NetnsTest, RootNamespaceCannotReachThePair) {
  SKIP_WITHOUT_NETNS();
  NetnsPair pair;
  start_echo_server(pair, log_path("root"));
  const int fd = connect_to_echo(pair, Side::b);
  ASSERT_GE(fd, 0) << file_text(log_path("root"));
  close(fd);
  const auto [code, routes] = run_command("ip -4 route show type blackhole");
  EXPECT_NE(routes.find(pair.subnet()), std::string::npos) << routes;
  const int root = tcp_socket(pair, std::nullopt);
  EXPECT_NE(connect_within(root, pair.address_a(), std::chrono::seconds(1)), 0)
      << "the root namespace reached " << pair.address_a();
  close(root);
}

TEST(NetnsTest, SpawnedPidIsTheRealProcessInsideTheNamespace) {
  SKIP_WITHOUT_NETNS();
  NetnsPair pair;
  struct stat ns {};
  ASSERT_EQ(stat(("/run/netns/" + pair.namespace_name(Side::b)).c_str(), &ns), 0);
  const pid_t pid = pair.spawn_in(Side::b, {"sleep", "60"});
  const std::string link = "/proc/" + std::to_string(pid) + "/ns/net";
  const std::string expected = "net:[" + std::to_string(ns.st_ino) + "]";
  EXPECT_TRUE(within_5s([&] {
    std::error_code e;
    return std::filesystem::read_symlink(link, e).string() == expected;
  })) << link
      << " is not " << expected;
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(wait_exit_within(pid, std::chrono::seconds(5)), 128 + SIGKILL);

  const std::string out = log_path("addr");
  std::filesystem::remove(out);
  const pid_t ip = pair.spawn_in(Side::a, {"ip", "-o", "-4", "addr", "show"}, out);
  EXPECT_EQ(wait_exit_within(ip, std::chrono::seconds(5)), 0) << file_text(out);
  const std::string addresses = file_text(out);
  EXPECT_NE(addresses.find(pair.address_a() + "/30"), std::string::npos) << addresses;
  EXPECT_NE(addresses.find("127.0.0.1"), std::string::npos) << "loopback is down: " << addresses;
  EXPECT_EQ(addresses.find(pair.address_b()), std::string::npos) << addresses;
}

// What the root namespace shows of a pair, to find leftovers with.
struct Traces {
  std::string netns, links, routes;
  bool mention(const std::string& text) const {
    return netns.find(text) != std::string::npos || links.find(text) != std::string::npos ||
           routes.find(text) != std::string::npos;
  }
};
Traces traces() {
  return {run_command("ip netns list").second, run_command("ip link show").second,
          run_command("ip -4 route show table all").second};
}

TEST(NetnsTest, DestroyedPairLeavesNoNamespaceLinkRouteOrProcess) {
  SKIP_WITHOUT_NETNS();
  std::string names[2], interfaces[2], subnet;
  pid_t sleeper = -1;
  {
    NetnsPair pair;
    NetnsPair other;  // two at once: their names and subnets differ
    EXPECT_NE(pair.subnet(), other.subnet());
    EXPECT_NE(pair.namespace_name(Side::a), other.namespace_name(Side::a));
    EXPECT_NE(pair.interface(Side::a), other.interface(Side::a));
    for (int s = 0; s < 2; ++s) {
      const Side side = s == 0 ? Side::a : Side::b;
      names[s] = pair.namespace_name(side);
      interfaces[s] = pair.interface(side);
      EXPECT_LE(interfaces[s].size(), 15u) << "Linux caps interface names at 15";
    }
    subnet = pair.subnet();
    pair.cut();
    sleeper = pair.spawn_in(Side::a, {"sleep", "60"});  // still running at the end
    EXPECT_TRUE(traces().mention(names[0]));
    EXPECT_TRUE(traces().mention(subnet));
  }
  const Traces left = traces();
  for (const auto& text : {names[0], names[1], interfaces[0], interfaces[1], subnet}) {
    EXPECT_FALSE(left.mention(text)) << text << " is left:\n"
                                     << left.netns << left.links << left.routes;
  }
  EXPECT_EQ(kill(sleeper, 0), -1) << "the process in the namespace still runs";
}

TEST(NetnsTest, SweepRemovesWhatAKilledTestLeft) {
  SKIP_WITHOUT_NETNS();
  int channel[2];
  ASSERT_EQ(pipe(channel), 0);
  const pid_t test = fork();  // no threads run here: the child may go on without exec
  if (test == 0) {
    close(channel[0]);
    try {
      NetnsPair pair;
      pair.spawn_in(Side::b, {"sleep", "60"});
      const std::string names = pair.namespace_name(Side::a) + " " + pair.namespace_name(Side::b) +
                                " " + pair.subnet() + "\n";
      (void)!write(channel[1], names.data(), names.size());
      pause();
    } catch (...) {
    }
    _exit(1);
  }
  close(channel[1]);
  char buffer[256] = {};
  ssize_t n = 0;
  pollfd p{channel[0], POLLIN, 0};
  if (poll(&p, 1, 10000) == 1) n = read(channel[0], buffer, sizeof buffer - 1);
  close(channel[0]);
  kill(test, SIGKILL);
  EXPECT_EQ(wait_exit_within(test, std::chrono::seconds(5)), 128 + SIGKILL);
  ASSERT_GT(n, 0) << "the child made no pair";
  std::istringstream words(buffer);
  std::string a, b, subnet;
  words >> a >> b >> subnet;
  ASSERT_TRUE(traces().mention(a) && traces().mention(b) && traces().mention(subnet))
      << "a SIGKILLed test leaves its pair (else this test checks nothing)";

  NetnsPair::sweep();
  const Traces left = traces();
  for (const auto& text : {a, b, subnet}) {
    EXPECT_FALSE(left.mention(text)) << text << " is left:\n" << left.netns << left.routes;
  }
}

}  // namespace
}  // namespace pronghorn::testing
